/* zbmd/wire.h — the zbmd wire format: Ethernet / IPv4 / UDP / zbmd header.
 *
 * Byte-by-byte layout and the reasoning behind it: docs/wire.md. All
 * multi-byte fields are big-endian (network order) on the wire; struct
 * wire_hdr holds them in host order.
 *
 * This file is pure C (no DPDK): the encoder writes the 106 header bytes of a
 * frame into a caller buffer, the decoder validates a received frame and
 * returns a reason code (enum wire_reason). Nothing here keeps state;
 * session-level checks (known peer, epoch, sequence window) live in the
 * transport, which uses the same reason codes for its drop counters.
 *
 * Thread-safety: every function is reentrant.
 */
#ifndef ZBMD_WIRE_H
#define ZBMD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_VERSION     1
#define WIRE_ETH_LEN     14
#define WIRE_IP_LEN      20      /* IPv4 without options (we send none, accept none) */
#define WIRE_UDP_LEN     8
#define WIRE_ZB_LEN      72
#define WIRE_HDRS_LEN    (WIRE_ETH_LEN + WIRE_IP_LEN + WIRE_UDP_LEN + WIRE_ZB_LEN)
#define WIRE_ETHERTYPE_IPV4 0x0800
#define WIRE_IPPROTO_UDP 17
#define WIRE_SACK_BITS   64      /* selective-ack bitmap after the cumulative ack */

/* IP MTU bounds the transport accepts (Ethernet 1500 .. jumbo 9600). */
#define WIRE_MTU_MIN     256
#define WIRE_MTU_MAX     9600
/* Largest fragment payload for an IP MTU. */
#define WIRE_FRAG_MAX(mtu) ((mtu) - WIRE_IP_LEN - WIRE_UDP_LEN - WIRE_ZB_LEN)

enum wire_type {
	WIRE_T_DATA = 1,   /* one fragment of a message (+ piggybacked ack) */
	WIRE_T_ACK = 2,    /* ack / window update / probe, no payload */
};

/* flags */
#define WIRE_F_ACKREQ 0x01  /* receiver: answer with an ack at once */
#define WIRE_F_RESET  0x02  /* "I started a new session epoch and have not
			     * heard you address it yet: reset your session
			     * with me" (obeyed once per epoch; docs/wire.md) */
#define WIRE_F_KNOWN  0x03  /* mask of the flags this version defines */

/* Why a frame was refused. WIRE_OK = 0; the rest index drop counters. The
 * first group is found by wire_decode() alone, the second by the transport
 * (session state). */
enum wire_reason {
	WIRE_OK = 0,
	WIRE_E_SHORT,        /* shorter than the headers it claims */
	WIRE_E_ETHERTYPE,    /* not IPv4 (ARP etc. belong to the link layer) */
	WIRE_E_IP_HDR,       /* IP version != 4 or header length != 20 */
	WIRE_E_IP_LEN,       /* IP total length does not fit the frame */
	WIRE_E_IP_FRAG,      /* IP fragment (we never fragment at IP) */
	WIRE_E_IP_PROTO,     /* not UDP */
	WIRE_E_IP_CSUM,      /* IPv4 header checksum wrong */
	WIRE_E_IP_DST,       /* IP destination is not this node */
	WIRE_E_UDP_PORT,     /* UDP destination port is not ours + lane */
	WIRE_E_UDP_LEN,      /* UDP length != IP payload length */
	WIRE_E_UDP_CSUM,     /* UDP checksum present and wrong */
	WIRE_E_VERSION,      /* zbmd version unknown */
	WIRE_E_HDR_CSUM,     /* zbmd header checksum wrong */
	WIRE_E_CLUSTER,      /* another cluster's frame */
	WIRE_E_DST_NODE,     /* addressed to another node */
	WIRE_E_LANE,         /* addressed to another lane (lcore) */
	WIRE_E_TYPE,         /* unknown frame type */
	WIRE_E_RESERVED,     /* unknown flag or reserved field not zero */
	WIRE_E_PAYLOAD_LEN,  /* payload length disagrees with UDP length */
	WIRE_E_FRAG,         /* fragment fields inconsistent */
	WIRE_E_MSG_SIZE,     /* message larger than the configured maximum */
	/* transport (session) level */
	WIRE_E_UNKNOWN_PEER, /* source node is not a configured peer */
	WIRE_E_SRC_ADDR,     /* source IP is not the peer's */
	WIRE_E_STALE_EPOCH,  /* from / to an older incarnation: refused */
	WIRE_E_BAD_EPOCH,    /* claims an epoch of ours that never existed */
	WIRE_E_SEQ_WINDOW,   /* sequence beyond the receive window */
	WIRE_E_ACK_RANGE,    /* acks a sequence we never sent */
	WIRE_E_MSG_WINDOW,   /* message id outside the stream's window */
	WIRE_E_MSG_MISMATCH, /* fragment disagrees with its message's others */
	WIRE_E_STREAM,       /* stream number beyond the configured count */
	WIRE_REASON_COUNT
};

/* Short stable name ("ip_csum", "stale_epoch", ...) for counters/metrics.
 * Never NULL. */
const char *wire_reason_name(enum wire_reason r);

/* The zbmd header in host order. Fields that a type does not use are 0. */
struct wire_hdr {
	uint8_t type;          /* enum wire_type */
	uint8_t flags;         /* WIRE_F_* */
	uint8_t lane;          /* both ends' lane (one transport instance each) */
	uint32_t cluster;
	uint16_t src_node, dst_node;
	uint16_t stream;       /* DATA: the stream; ACK: its sender's stream
				* count, 0 = not stated (docs/wire.md) */
	uint32_t src_epoch;    /* sender's session epoch with the receiver */
	uint32_t dst_epoch;    /* sender's view of the receiver's (0 = unknown) */
	uint32_t seq;          /* DATA: this frame's sequence number */
	uint32_t ack;          /* next sequence expected from the receiver */
	uint64_t sack;         /* bit i: seq ack+1+i received */
	uint16_t credit;       /* frames the sender of this header accepts beyond ack */
	uint16_t payload_len;  /* bytes after the header */
	uint32_t msg_id;       /* per (session, stream), from 0 */
	uint32_t msg_len;      /* whole message, bytes */
	uint32_t frag_index, frag_count;
	uint16_t frag_size;    /* payload bytes of every fragment but the last */
	uint16_t share;        /* each peer's share of the sender's reassembly
				* arena, 64 KiB units (0 = not stated) */
	uint32_t tsval;        /* sender's clock, microseconds (wraps) */
	uint32_t tsecr;        /* tsval of the latest DATA frame received from
				* the destination (0 = none): RTT samples */
};

/* Addresses of one frame. ip in network byte order, ports in host order. */
struct wire_addr {
	uint8_t src_mac[6], dst_mac[6];
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
};

/* What the receiver checks a frame against (wire_decode). */
struct wire_rx_cfg {
	uint32_t cluster;
	uint16_t node;         /* this node */
	uint8_t lane;          /* this instance */
	uint32_t ip;           /* this node's IP, network order; 0 = any */
	uint16_t udp_port;     /* base port; frames go to udp_port + lane */
	uint16_t frag_max;     /* largest payload accepted in one frame */
	uint32_t msg_max;      /* largest message accepted */
};

/* wire_decode flags */
#define WIRE_RX_CSUM_OK 0x1   /* the NIC verified IP and UDP checksums */
#define WIRE_RX_IP_CSUM_OK 0x2 /* the IPv4 header checksum was verified
				* already (the dataplane's classifier) */

/* wire_encode flags */
#define WIRE_TX_UDP_CSUM 0x1  /* compute the UDP checksum in software (covers
			       * the payload); otherwise it is sent as 0
			       * ("none", RFC 768) or left to NIC offload */

/* Write the Ethernet, IPv4, UDP and zbmd headers (WIRE_HDRS_LEN bytes) for
 * a frame carrying h->payload_len bytes of `payload` (payload may be NULL
 * when payload_len is 0 or WIRE_TX_UDP_CSUM is not set). The zbmd header
 * checksum and IPv4 checksum are always computed. Returns WIRE_HDRS_LEN.
 * Preconditions (asserted): known type, payload_len <= 65535 - headers. */
size_t wire_encode(uint8_t *buf, const struct wire_addr *a,
		   const struct wire_hdr *h, const void *payload,
		   uint16_t ip_id, unsigned flags);

/* Header template for the DATA frames of one message to one peer: they
 * differ only in the fields wire_tmpl_fill writes (flags, seq, ack, sack,
 * credit, payload_len, frag_index, tsval, tsecr, and the IPv4 length, id and
 * checksum and the UDP length that follow from them). wire_tmpl_init writes
 * every other byte once and keeps the ones'-complement sums of the constant
 * fields, so a frame costs a dozen stores and a short sum instead of a full
 * wire_encode. The bytes are exactly wire_encode's (tests/transport/
 * test_wire.c compares them). Not for WIRE_TX_UDP_CSUM (the UDP checksum
 * covers the payload): use wire_encode there. */
struct wire_tmpl {
	uint8_t buf[WIRE_HDRS_LEN];
	uint32_t ip_sum;       /* IPv4 header words but total length and id */
	uint32_t zb_sum;       /* zbmd header fields wire_tmpl_fill leaves */
};

/* From h's constant fields (type must be WIRE_T_DATA) and a. */
void wire_tmpl_init(struct wire_tmpl *t, const struct wire_addr *a,
		    const struct wire_hdr *h);
/* Complete t->buf for a frame whose constant fields are those t was made
 * from (asserted in debug builds) and whose variable fields are h's. */
void wire_tmpl_fill(struct wire_tmpl *t, const struct wire_hdr *h,
		    uint16_t ip_id);

/* Validate a received Ethernet frame and decode its zbmd header.
 * On WIRE_OK: *h holds the header, *a the addresses, *payload points at the
 * h->payload_len payload bytes inside `frame`. On any other return the
 * outputs are unspecified and the frame must be dropped. Checks, in order:
 * lengths, ethertype, IPv4 header (version, IHL, total length, fragment bits,
 * protocol, checksum, destination), UDP (port, length, checksum when
 * non-zero unless WIRE_RX_CSUM_OK), zbmd (version, checksum, cluster,
 * destination node, lane, type, reserved bits, payload length, fragment
 * fields, message size). Never reads outside frame[0, len). */
enum wire_reason wire_decode(const uint8_t *frame, size_t len,
			     const struct wire_rx_cfg *cfg, unsigned flags,
			     struct wire_hdr *h, struct wire_addr *a,
			     const uint8_t **payload);

/* Cheap demultiplexer for the link layer: when the frame is IPv4/UDP to
 * udp_port .. udp_port + 255, the lane it is for (0..255: hand it to that
 * lane's tp_rx, which validates everything); otherwise -1 (ARP, other
 * traffic). Reads only the first 38 bytes, never past len. */
int wire_is_zbmd(const uint8_t *frame, size_t len, uint16_t udp_port);

/* Internet checksum (RFC 1071) helpers: sum 16-bit words of buf into a
 * 32-bit accumulator (len may be odd only for the last call) and fold. */
uint32_t wire_csum_add(uint32_t sum, const void *buf, size_t len);
uint16_t wire_csum_fold(uint32_t sum);

#endif /* ZBMD_WIRE_H */
