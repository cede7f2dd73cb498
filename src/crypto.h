/* crypto.h - the only interface to libsodium: random tokens and path keys. */
#ifndef WSLOCK_CRYPTO_H
#define WSLOCK_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WSL_TOKEN_HEX 32	/* 16 random bytes as lowercase hex */
#define WSL_KEY_HEX 64		/* BLAKE2b-256 as lowercase hex */

/* True when s is exactly n lowercase hex digits: the form of tokens
 * (n = WSL_TOKEN_HEX) and registry keys (n = WSL_KEY_HEX). */
bool crypto_hex_valid(const char *s, size_t n);

/* Initialises libsodium once (sodium_init(3)); returns 0, or -1 when the
 * library cannot be used (no entropy source). Safe to call repeatedly. */
int crypto_setup(void);

/* 32 random bits from libsodium (randombytes_random(3)); crypto_setup()
 * must have succeeded. */
uint32_t crypto_random_u32(void);

/* Fills out (WSL_TOKEN_HEX + 1 bytes) with 16 bytes from randombytes_buf()
 * as lowercase hex and a NUL. crypto_setup() must have succeeded. */
void crypto_token(char out[WSL_TOKEN_HEX + 1]);

/* Fills out (n*2 + 1 bytes) with n random bytes as hex; n <= 32. */
void crypto_random_hex(char *out, size_t n);

/* The registry key of a canonical workspace path: lowercase hex of the
 * unkeyed 32-byte BLAKE2b (crypto_generichash) of the path's bytes, without
 * the NUL; equal to `printf %s PATH | b2sum -l 256`. */
void crypto_path_key(const char *path, char out[WSL_KEY_HEX + 1]);

/* Base64 (original alphabet, padded) of len bytes at bin, as a new
 * NUL-terminated string (free(3) it); NULL when out of memory or when
 * len is too large for the encoded length to fit a size_t. */
char *crypto_base64_encode(const void *bin, size_t len);

/* Decodes b64_len bytes of padded original-alphabet base64, all of which
 * must be consumed, into a new buffer (*out, free(3) it) holding *out_len
 * bytes plus a NUL not counted in *out_len.  Returns 0, or -1 for invalid
 * input or when out of memory (*out is then NULL). */
int crypto_base64_decode(const char *b64, size_t b64_len, char **out,
			 size_t *out_len);

#endif
