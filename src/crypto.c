/* crypto.c - libsodium: random owner tokens and BLAKE2b registry keys. */
#include "crypto.h"

#include <string.h>
#include <sodium.h>

bool crypto_hex_valid(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0';
}

int crypto_setup(void)
{
	return sodium_init() < 0 ? -1 : 0;
}

uint32_t crypto_random_u32(void)
{
	return randombytes_random();
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

#include <stdint.h>	/* SIZE_MAX, and malloc, free: the base64 helpers below */
#include <stdlib.h>

char *crypto_base64_encode(const void *bin, size_t len)
{
	size_t cap;
	char *out;

	if (len > (SIZE_MAX - 8) / 4 * 3)
		return NULL;
	cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	out = malloc(cap);
	if (out == NULL)
		return NULL;
	sodium_bin2base64(out, cap, bin, len, sodium_base64_VARIANT_ORIGINAL);
	return out;
}

int crypto_base64_decode(const char *b64, size_t b64_len, char **out,
			 size_t *out_len)
{
	size_t cap = b64_len / 4 * 3 + 1;
	const char *end = NULL;
	size_t n = 0;
	char *buf;

	*out = NULL;
	*out_len = 0;
	if (b64_len % 4 != 0)
		return -1;
	buf = malloc(cap);
	if (buf == NULL)
		return -1;
	if (sodium_base642bin((unsigned char *)buf, cap, b64, b64_len, NULL, &n,
			      &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    end != b64 + b64_len) {
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
}
