/* dataplane/remote_car.h — what carries remote actor messages (internal to
 * the dataplane module): remote.c's lanes talk to a *carrier* through these
 * ops, with tp_send / tp_msg shapes, so that the reliable transport on the
 * ports ("dpdk") and a net provider ("tcp", "rdma": remote_net.c) carry the
 * same records the same way. docs/remote.md "Carriers".
 *
 * Contract (the transport's, zbmd/transport.h, restated for a carrier):
 *   - send: the message (peer, stream, data, len) is accepted whole (0),
 *     refused for now (-EAGAIN: nothing taken, the lane retries), or refused
 *     with an error (ZB_ERR_PEER_DOWN, -EMSGSIZE: the lane reports it).
 *     With ref != NULL the carrier takes a reference on the payload and
 *     drops it when it no longer reads data; else data must stay valid
 *     until zbra__send_done for the cookie. Every accepted message gets
 *     exactly one zbra__send_done(lane, cookie, status).
 *   - messages of one (peer, stream) arrive in order, exactly once while
 *     the peer stays up; zbra__deliver returns 0 (taken: the lane releases
 *     the message later with release()) or -EAGAIN (the carrier keeps it and
 *     offers it again later, holding back what follows on that stream).
 *   - peer events: TP_PEER_DOWN (the peer is lost: messages accepted and not
 *     yet done fail), TP_PEER_UP (connected, or again after DOWN), and from
 *     the transport TP_PEER_RESTARTED / TP_PEER_RESET (the session started
 *     over, by the peer / by this side).
 * Every op and upcall runs on the lane's lcore, except create/destroy (main
 * thread, before launch / after stop).
 */
#ifndef ZBMD_DATAPLANE_REMOTE_CAR_H
#define ZBMD_DATAPLANE_REMOTE_CAR_H

#include <stddef.h>
#include <stdint.h>

#include "zbmd/transport.h"

struct zb_config;
struct net_ops;

struct zbra_car_ops {
	int (*send)(void *car, uint16_t peer, uint16_t stream, const void *data,
		    size_t len, struct tp_ref *ref, uint64_t cookie, uint64_t now_ns);
	void (*release)(void *car, struct tp_msg *m);
	/* Progress (completions, connections, arrivals) from the lane's poller;
	 * NULL when the lcore loop drives the carrier itself (the transport).
	 * Returns the work done. */
	unsigned (*poll)(void *car, uint64_t now_ns);
	/* Optional: the largest message the peer takes now (0: not a peer),
	 * checked before the header of a two-part message goes out. */
	size_t (*max_to)(void *car, uint16_t peer);
	/* Optional: start the session with the peer over (what was accepted
	 * for it fails; it drops what it holds of ours, a half-received
	 * message too), with a TP_PEER_RESET upcall here. After the payload
	 * of a two-part message was refused behind its accepted header. */
	void (*reset)(void *car, uint16_t peer, uint64_t now_ns);
};

/* Upcalls into remote.c, on lane `lane`'s lcore. */
int zbra__deliver(unsigned lane, struct tp_msg *m);
void zbra__send_done(unsigned lane, uint64_t cookie, int status);
void zbra__peer_event(unsigned lane, uint16_t peer, enum tp_peer_event ev);
/* The carrier refuses (skips) the message of (peer, stream) that has begun
 * to arrive: larger than this node takes. The lane drops the header of a
 * two-part message it holds for that stream (no payload comes for it). */
void zbra__refused(unsigned lane, uint16_t peer, uint16_t stream);

/* The net carrier (remote_net.c): a net provider instance of its own, one
 * send and one recv comm per peer on channel 0. */
extern const struct zbra_car_ops zbra__net_car_ops;
struct zbra_netcar;
/* Main thread, before launch: creates the provider instance (ops->init
 * with a copy of cfg whose [transport] tcp_port is moved by
 * ZBRA_NET_PORT_OFFSET, so that it never meets the collectives' instance)
 * and everything the carrier will use (nothing allocates later). 0 or a
 * negative errno; err says why. */
#define ZBRA_NET_PORT_OFFSET 2u
int zbra__netcar_create(const struct zb_config *cfg, const struct net_ops *ops,
			void *provider_arg, unsigned lane, uint64_t max_message,
			struct zbra_netcar **out, char *err, size_t errlen);
/* After the lcores stopped: closes the comms and the provider instance,
 * makes no upcall. Buffers still held by the lane must have been released
 * first (zbra_detach does). NULL is a no-op. */
void zbra__netcar_destroy(struct zbra_netcar *c);

struct zbra_netcar_stats {
	uint64_t msgs_out, msgs_in, frags_out, frags_in, credits_out, bad, peer_downs,
		connects, silent, half_open,
		refused;   /* messages over our max_message, skipped, REFUSE sent */
};
void zbra__netcar_stats(const struct zbra_netcar *c, struct zbra_netcar_stats *out);

#endif
