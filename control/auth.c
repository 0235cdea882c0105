/* Authenticated control messages: cluster id + per-sender counter + MAC
 * (libsodium crypto_auth = HMAC-SHA-512-256) under a pre-shared key. */
#include "zbmd/control.h"
#include "zbmd/common.h"

#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_MAGIC   0x3143425au   /* "ZBC1" little endian */
#define CTL_VERSION 1

static_assert(CTL_TAG_BYTES == crypto_auth_BYTES, "tag size is crypto_auth's");
static_assert(CTL_KEY_BYTES == crypto_auth_KEYBYTES, "key size is crypto_auth's");
static_assert(CTL_HDR_BYTES + CTL_TAG_BYTES < CTL_MSG_MAX, "room for payload");

static const char *const reason_names[CTL_AUTH_NREASONS] = {
	[CTL_AUTH_MALFORMED] = "malformed",
	[CTL_AUTH_CLUSTER] = "cluster",
	[CTL_AUTH_MAC] = "mac",
	[CTL_AUTH_REPLAY] = "replay",
};

const char *ctl_auth_reason_name(enum ctl_auth_reason r)
{
	return (unsigned)r < CTL_AUTH_NREASONS ? reason_names[r] : "unknown";
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = v >> (8 * i); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = v >> (8 * i); }
static uint16_t get16(const uint8_t *p) { return p[0] | (uint16_t)p[1] << 8; }
static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int ctl_auth_load_key(const char *path, uint8_t key[CTL_KEY_BYTES],
		      char *err, size_t errlen)
{
	uint8_t buf[CTL_PSK_FILE_MAX + 1];   /* + 1: to see that a file is longer */
	struct stat st;
	ssize_t n = 0, k;
	int fd, rc = 0;

	ZB_ASSERT(path != NULL && key != NULL);
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -ENOSYS;
	}
	/* O_NONBLOCK: a FIFO's open() would wait for a writer; it is refused
	 * below as every file that is not a regular one */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "psk_file %s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(err, errlen, "psk_file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "psk_file %s: not a regular file (expected "
			 "a readable key file)", path);
		goto out;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		rc = -errno;
		snprintf(err, errlen, "psk_file %s: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		rc = -EPERM;
		snprintf(err, errlen,
			 "psk_file %s: mode %04o lets group/others access the key "
			 "(chmod 600 it)", path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	/* The whole file (read() may return less than asked), and no more than
	 * CTL_PSK_FILE_MAX: a longer file is refused rather than cut short, so
	 * that two nodes never derive the same key from different files. */
	while (n < (ssize_t)sizeof(buf) &&
	       (k = read(fd, buf + n, sizeof(buf) - (size_t)n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = -errno;
			snprintf(err, errlen, "psk_file %s: %s", path, strerror(errno));
			goto out;
		}
		n += k;
	}
	if (n > CTL_PSK_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, errlen, "psk_file %s: longer than %d bytes", path,
			 CTL_PSK_FILE_MAX);
		goto out;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
			 buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	if (n < 16) {
		rc = -EINVAL;
		snprintf(err, errlen, "psk_file %s: key shorter than 16 bytes", path);
		goto out;
	}
	crypto_generichash(key, CTL_KEY_BYTES, buf, (size_t)n,
			   (const unsigned char *)"zbmd-cluster-psk", 16);
out:
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

void ctl_auth_init(struct ctl_auth *a, uint32_t cluster_id, uint16_t self,
		   const uint8_t key[CTL_KEY_BYTES], uint64_t counter_start)
{
	ZB_ASSERT(a != NULL && key != NULL);
	ZB_ASSERT(self < CFG_MAX_NODES);
	memset(a, 0, sizeof(*a));
	a->cluster_id = cluster_id;
	a->self = self;
	memcpy(a->key, key, CTL_KEY_BYTES);
	a->tx_counter = counter_start;
}

int ctl_auth_seal(struct ctl_auth *a, uint8_t type, const void *payload,
		  size_t len, uint8_t *out, size_t cap)
{
	ZB_ASSERT(a != NULL && out != NULL);
	ZB_ASSERT(len == 0 || payload != NULL);
	size_t total = CTL_HDR_BYTES + len + CTL_TAG_BYTES;
	if (total > cap || total > CTL_MSG_MAX)
		return -EMSGSIZE;
	put32(out, CTL_MAGIC);
	out[4] = CTL_VERSION;
	out[5] = type;
	put16(out + 6, a->self);
	put32(out + 8, a->cluster_id);
	put64(out + 12, ++a->tx_counter);
	if (len)
		memcpy(out + CTL_HDR_BYTES, payload, len);
	crypto_auth(out + CTL_HDR_BYTES + len, out, CTL_HDR_BYTES + len, a->key);
	return (int)total;
}

static int reject(struct ctl_auth *a, enum ctl_auth_reason r,
		  enum ctl_auth_reason *why)
{
	a->rejected[r]++;
	if (why)
		*why = r;
	return ZB_ERR_AUTH;
}

int ctl_auth_open(struct ctl_auth *a, const uint8_t *msg, size_t len,
		  uint8_t *type, uint16_t *sender, const uint8_t **payload,
		  size_t *plen, enum ctl_auth_reason *why)
{
	ZB_ASSERT(a != NULL && type && sender && payload && plen);
	if (!msg || len < CTL_HDR_BYTES + CTL_TAG_BYTES || len > CTL_MSG_MAX ||
	    get32(msg) != CTL_MAGIC || msg[4] != CTL_VERSION)
		return reject(a, CTL_AUTH_MALFORMED, why);
	uint16_t from = get16(msg + 6);
	if (from >= CFG_MAX_NODES || from == a->self)
		return reject(a, CTL_AUTH_MALFORMED, why);
	if (get32(msg + 8) != a->cluster_id)
		return reject(a, CTL_AUTH_CLUSTER, why);
	size_t body = len - CTL_TAG_BYTES;
	if (crypto_auth_verify(msg + body, msg, body, a->key) != 0)
		return reject(a, CTL_AUTH_MAC, why);
	uint64_t ctr = get64(msg + 12);
	if (ctr <= a->rx_last[from])
		return reject(a, CTL_AUTH_REPLAY, why);
	a->rx_last[from] = ctr;
	a->accepted++;
	*type = msg[5];
	*sender = from;
	*payload = msg + CTL_HDR_BYTES;
	*plen = body - CTL_HDR_BYTES;
	ZB_ASSERT(*plen <= CTL_MSG_MAX);
	return 0;
}
