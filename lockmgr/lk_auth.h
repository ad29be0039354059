/*
 * lk_auth.h — HMAC-SHA256 challenge-response between peers (libsodium).
 *
 * On every new TCP connection both ends send HELLO {id, to, cluster hash,
 * 32-byte random nonce}; each answers the other's nonce with AUTH {mac},
 * mac = HMAC(key, "ucfs-lk-auth-v1" | peer nonce | own id | peer id).
 * A connection carries nothing else until both MACs verified, so a peer
 * without the secret can neither send nor receive lock traffic, and a MAC
 * cannot be replayed on another connection (fresh nonces) or by another
 * node id (ids are inside the MAC).
 */
#ifndef UCFS_LK_AUTH_H
#define UCFS_LK_AUTH_H

#include <stdint.h>

void lk_auth_nonce(uint8_t nonce[32]);
void lk_auth_mac(const uint8_t key[32], const uint8_t peer_nonce[32],
		 uint32_t self, uint32_t peer, uint8_t mac[32]);
/* 0 if @mac is what @peer must answer to our @nonce; -EACCES if not. */
int lk_auth_verify(const uint8_t key[32], const uint8_t nonce[32],
		   uint32_t self, uint32_t peer, const uint8_t mac[32]);

#endif /* UCFS_LK_AUTH_H */
