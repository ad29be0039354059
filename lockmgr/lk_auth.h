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
 *
 * After the handshake every frame on the connection is followed by a
 * 16-byte tag (lk_auth_frame_tag): ChaCha20-Poly1305 (IETF) over the
 * frame as associated data, with no message, keyed per connection by
 * lk_auth_frame_key (both nonces and both ids under the cluster key) and
 * with the frame header's seq (unique per sender and link for the life of
 * the lockspace) and the sender's node id as nonce: both ends send on the
 * connection, under the one key, each numbering its own frames, so the
 * sender id keeps their nonces apart. A frame altered or injected fails
 * the tag; one replayed or reordered fails the transport's check that
 * seq grows; one reflected back to its sender fails the tag (other id).
 */
#ifndef UCFS_LK_AUTH_H
#define UCFS_LK_AUTH_H

#include <stddef.h>
#include <stdint.h>

void lk_auth_nonce(uint8_t nonce[32]);
void lk_auth_mac(const uint8_t key[32], const uint8_t peer_nonce[32],
		 uint32_t self, uint32_t peer, uint8_t mac[32]);
/* 0 if @mac is what @peer must answer to our @nonce; -EACCES if not. */
int lk_auth_verify(const uint8_t key[32], const uint8_t nonce[32],
		   uint32_t self, uint32_t peer, const uint8_t mac[32]);

#define LK_FRAME_TAG 16 /* bytes after each authenticated frame */

/* The frame key of the connection @dialer opened to @acceptor, from the
 * nonces each sent in its HELLO. */
void lk_auth_frame_key(const uint8_t key[32], const uint8_t dialer_nonce[32],
		       const uint8_t acceptor_nonce[32], uint32_t dialer,
		       uint32_t acceptor, uint8_t out[32]);
/* Tag of a frame sent by node @sender whose header seq is @n. */
void lk_auth_frame_tag(const uint8_t fkey[32], uint32_t sender, uint64_t n,
		       const void *frame, size_t len,
		       uint8_t tag[LK_FRAME_TAG]);
/* 0 if @tag is right for the frame (from @sender, header seq @n),
 * -EBADMSG if not. */
int lk_auth_frame_verify(const uint8_t fkey[32], uint32_t sender, uint64_t n,
			 const void *frame, size_t len,
			 const uint8_t tag[LK_FRAME_TAG]);

#endif /* UCFS_LK_AUTH_H */
