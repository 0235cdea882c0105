/* Control-message authentication: good MAC accepted; tampered, replayed,
 * wrong-cluster, wrong-key and malformed messages rejected and counted; the
 * PSK file refused when group/others can read it. */
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "tap.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t type;
static uint16_t sender;
static const uint8_t *pl;
static size_t plen;
static enum ctl_auth_reason why;

static int open_msg(struct ctl_auth *a, const uint8_t *m, size_t n)
{
	why = CTL_AUTH_NREASONS;
	return ctl_auth_open(a, m, n, &type, &sender, &pl, &plen, &why);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void write_file(const char *path, const char *s, mode_t mode)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	ZB_ASSERT(fd >= 0);
	ZB_ASSERT(write(fd, s, strlen(s)) == (ssize_t)strlen(s));
	close(fd);
	chmod(path, mode);
}

int main(void)
{
	uint8_t k1[CTL_KEY_BYTES], k2[CTL_KEY_BYTES], k3[CTL_KEY_BYTES], m[CTL_MSG_MAX], c[CTL_MSG_MAX];
	char err[256], dir[] = "/tmp/zbctl-authXXXXXX", path[300];
	struct ctl_auth tx, rx, rx_wrong_key, rx_other_cluster;

	tap_plan(33);
	ZB_ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/psk", dir);
	write_file(path, "correct horse battery staple 0123\n", 0600);
	is_int(ctl_auth_load_key(path, k1, err, sizeof(err)), 0, "0600 key file loads");
	write_file(path, "correct horse battery staple 0123", 0600);
	is_int(ctl_auth_load_key(path, k3, err, sizeof(err)), 0, "same key without newline");
	ok(memcmp(k1, k3, sizeof(k1)) == 0, "trailing newline ignored: same key");
	chmod(path, 0640);
	is_int(ctl_auth_load_key(path, k3, err, sizeof(err)), -EPERM, "0640 refused");
	ok(strstr(err, "group/others") != NULL, "error says why: %s", err);
	chmod(path, 0604);
	is_int(ctl_auth_load_key(path, k3, err, sizeof(err)), -EPERM, "0604 refused");
	write_file(path, "short\n", 0600);
	is_int(ctl_auth_load_key(path, k3, err, sizeof(err)), -EINVAL, "key under 16 bytes refused");
	/* a long key file: all of it counts, and over CTL_PSK_FILE_MAX it is
	 * refused rather than cut short (two files differing only after 4096
	 * bytes used to give the same key) */
	static char big[CTL_PSK_FILE_MAX + 2];
	uint8_t kb1[CTL_KEY_BYTES], kb2[CTL_KEY_BYTES];
	memset(big, 'k', CTL_PSK_FILE_MAX);
	big[CTL_PSK_FILE_MAX - 1] = '1';
	write_file(path, big, 0600);
	is_int(ctl_auth_load_key(path, kb1, err, sizeof(err)), 0, "a key file of 4096 bytes loads");
	big[CTL_PSK_FILE_MAX - 1] = '2';
	write_file(path, big, 0600);
	is_int(ctl_auth_load_key(path, kb2, err, sizeof(err)), 0, "... another one too");
	ok(memcmp(kb1, kb2, sizeof(kb1)) != 0, "its last byte counts");
	big[CTL_PSK_FILE_MAX] = 'x';
	write_file(path, big, 0600);
	is_int(ctl_auth_load_key(path, kb2, err, sizeof(err)), -EFBIG, "4097 bytes: refused");
	ok(strstr(err, "longer than 4096") != NULL, "error says why: %s", err);
	snprintf(path, sizeof(path), "%s/none", dir);
	is_int(ctl_auth_load_key(path, k3, err, sizeof(err)), -ENOENT, "missing file: -ENOENT");
	snprintf(path, sizeof(path), "%s/psk2", dir);
	write_file(path, "a different secret of enough length", 0600);
	is_int(ctl_auth_load_key(path, k2, err, sizeof(err)), 0, "second key loads");

	ctl_auth_init(&tx, 7, 3, k1, 1000);
	ctl_auth_init(&rx, 7, 1, k1, 1);
	ctl_auth_init(&rx_wrong_key, 7, 1, k2, 1);
	ctl_auth_init(&rx_other_cluster, 8, 1, k1, 1);
	int n = ctl_auth_seal(&tx, 1, "hello", 5, m, sizeof(m));
	is_int(n, CTL_HDR_BYTES + 5 + CTL_TAG_BYTES, "sealed length");
	ok(open_msg(&rx, m, (size_t)n) == 0 && type == 1 && sender == 3 && plen == 5 &&
	   memcmp(pl, "hello", 5) == 0, "good message accepted, fields intact");
	is_int(open_msg(&rx, m, (size_t)n), ZB_ERR_AUTH, "replay rejected");
	is_int(why, CTL_AUTH_REPLAY, "... as replay");
	memcpy(c, m, (size_t)n);
	n = ctl_auth_seal(&tx, 1, "hello", 5, m, sizeof(m));
	m[CTL_HDR_BYTES] ^= 1;
	is_int(open_msg(&rx, m, (size_t)n), ZB_ERR_AUTH, "tampered payload rejected");
	is_int(why, CTL_AUTH_MAC, "... as bad MAC");
	m[CTL_HDR_BYTES] ^= 1;
	m[5] = 2;   /* type */
	is_int(open_msg(&rx, m, (size_t)n) == ZB_ERR_AUTH && why == CTL_AUTH_MAC, 1,
	       "tampered header rejected as bad MAC");
	m[5] = 1;
	is_int(open_msg(&rx_wrong_key, m, (size_t)n) == ZB_ERR_AUTH && why == CTL_AUTH_MAC, 1,
	       "wrong key rejected as bad MAC");
	is_int(open_msg(&rx_other_cluster, m, (size_t)n) == ZB_ERR_AUTH && why == CTL_AUTH_CLUSTER, 1,
	       "other cluster id rejected");
	is_int(open_msg(&rx, m, (size_t)n), 0, "the untampered message still accepted");
	is_int(open_msg(&rx, m, 10), ZB_ERR_AUTH, "truncated rejected");
	is_int(why, CTL_AUTH_MALFORMED, "... as malformed");
	struct ctl_auth self_tx;
	ctl_auth_init(&self_tx, 7, 1, k1, 5000);
	n = ctl_auth_seal(&self_tx, 1, NULL, 0, m, sizeof(m));
	is_int(open_msg(&rx, m, (size_t)n) == ZB_ERR_AUTH && why == CTL_AUTH_MALFORMED, 1,
	       "own sender id reflected back rejected");
	ok(rx.rejected[CTL_AUTH_REPLAY] == 1 && rx.rejected[CTL_AUTH_MAC] == 2 &&
	   rx.rejected[CTL_AUTH_MALFORMED] == 2 && rx.accepted == 2 &&
	   rx_wrong_key.rejected[CTL_AUTH_MAC] == 1 &&
	   rx_other_cluster.rejected[CTL_AUTH_CLUSTER] == 1, "every rejection counted by reason");
	/* A restarted sender (counter from a later clock) is accepted. */
	struct ctl_auth tx2;
	ctl_auth_init(&tx2, 7, 3, k1, 1000000);
	n = ctl_auth_seal(&tx2, 1, "x", 1, m, sizeof(m));
	is_int(open_msg(&rx, m, (size_t)n), 0, "restarted sender with a later counter accepted");
	is_int(ctl_auth_seal(&tx, 1, c, CTL_MSG_MAX, m, sizeof(m)), -EMSGSIZE, "oversized payload refused");
	uint8_t junk[100];
	memset(junk, 0xab, sizeof(junk));
	is_int(open_msg(&rx, junk, sizeof(junk)) == ZB_ERR_AUTH && why == CTL_AUTH_MALFORMED, 1,
	       "garbage rejected as malformed");
	/* A FIFO as the key file: refused at once (open() used to wait for a
	 * writer; the alarm turns that wait into EINTR, a failed check) */
	char fifo[320];
	struct sigaction sa = {.sa_handler = on_alarm};
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ZB_ASSERT(mkfifo(fifo, 0600) == 0);
	sigaction(SIGALRM, &sa, NULL); /* no SA_RESTART */
	alarm(5);
	is_int(ctl_auth_load_key(fifo, k3, err, sizeof(err)), -EINVAL,
	       "a FIFO as psk_file refused without waiting for a writer");
	alarm(0);
	ok(strstr(err, "not a regular file (expected") != NULL, "... it says so: %s", err);
	unlink(fifo);
	unlink(path);
	snprintf(path, sizeof(path), "%s/psk", dir);
	unlink(path);
	rmdir(dir);
	return tap_done();
}
