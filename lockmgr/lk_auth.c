/*
 * lk_auth.c — the challenge-response of lk_auth.h, with libsodium's
 * HMAC-SHA256 and constant-time comparison.
 */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "lockmgr/lk_auth.h"

static const char label[] = "ucfs-lk-auth-v1";

void lk_auth_nonce(uint8_t nonce[32])
{
	randombytes_buf(nonce, 32);
}

void lk_auth_mac(const uint8_t key[32], const uint8_t peer_nonce[32],
		 uint32_t self, uint32_t peer, uint8_t mac[32])
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key, 32);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)label,
				      sizeof(label));
	crypto_auth_hmacsha256_update(&st, peer_nonce, 32);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)&self,
				      sizeof(self));
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)&peer,
				      sizeof(peer));
	crypto_auth_hmacsha256_final(&st, mac);
}

int lk_auth_verify(const uint8_t key[32], const uint8_t nonce[32],
		   uint32_t self, uint32_t peer, const uint8_t mac[32])
{
	uint8_t want[32];
	int ok;

	/* the peer computed it as its "self" = peer, "peer" = us */
	lk_auth_mac(key, nonce, peer, self, want);
	ok = sodium_memcmp(want, mac, 32) == 0;
	sodium_memzero(want, sizeof(want));
	return ok ? 0 : -EACCES;
}
