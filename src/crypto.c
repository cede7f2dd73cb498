/* crypto.c - libsodium: random owner tokens and BLAKE2b registry keys. */
#include "crypto.h"

#include <string.h>
#include <sodium.h>

int crypto_setup(void)
{
	return sodium_init() < 0 ? -1 : 0;
}

void crypto_random_hex(char *out, size_t n)
{
	unsigned char buf[32];

	if (n > sizeof(buf))
		n = sizeof(buf);
	randombytes_buf(buf, n);
	sodium_bin2hex(out, n * 2 + 1, buf, n);
}

void crypto_token(char out[WSL_TOKEN_HEX + 1])
{
	crypto_random_hex(out, WSL_TOKEN_HEX / 2);
}

void crypto_path_key(const char *path, char out[WSL_KEY_HEX + 1])
{
	unsigned char hash[WSL_KEY_HEX / 2];

	crypto_generichash(hash, sizeof(hash), (const unsigned char *)path,
			   strlen(path), NULL, 0);
	sodium_bin2hex(out, WSL_KEY_HEX + 1, hash, sizeof(hash));
}
