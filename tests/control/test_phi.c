/* Phi-accrual detector against the formula (Hayashibara et al. 2004, Akka's
 * normal approximation), with a simulated clock: steady, jittered and paused
 * traces, window sliding, the min-std floor, parameter validation. */
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "tap.h"

#include <math.h>

#define MS 1000000ull

static struct ctl_phi d;

/* The formula written out directly, from the window statistics. */
static double phi_formula(double dt_ms, double mean_ms, double std_ms,
			  const struct ctl_phi_params *p)
{
	double m = mean_ms + p->acceptable_pause_ms;
	double s = fmax(std_ms, p->min_std_ms);
	double y = (dt_ms - m) / s;
	double e = exp(-y * (1.5976 + 0.070566 * y * y));
	return dt_ms > m ? -log10(e / (1 + e)) : -log10(1 - 1 / (1 + e));
}

/* The exact normal tail, for comparison with the logistic approximation. */
static double phi_exact(double dt_ms, double mean_ms, double std_ms,
			const struct ctl_phi_params *p)
{
	double m = mean_ms + p->acceptable_pause_ms;
	double s = fmax(std_ms, p->min_std_ms);
	return -log10(0.5 * erfc((dt_ms - m) / (s * M_SQRT2)));
}

static uint64_t rng = 88172645463325252ull;
static double uni(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

int main(void)
{
	struct ctl_phi_params p = {.window = 100, .min_std_ms = 50,
				   .acceptable_pause_ms = 500,
				   .first_interval_ms = 100, .threshold = 8};
	uint64_t t = 1000 * MS;

	tap_plan(22);
	ok(ctl_phi_init(&d, &p) == 0, "init");
	is_int((int)(ctl_phi_value(&d, t) * 1000), 0, "phi 0 before any heartbeat");
	/* Steady 100 ms trace. */
	for (int i = 0; i < 300; i++, t += 100 * MS)
		ctl_phi_heartbeat(&d, t);
	t -= 100 * MS;
	ok(fabs(ctl_phi_mean_ms(&d) - 100) < 1e-9, "steady: mean 100 ms (window slid past the seed)");
	ok(ctl_phi_std_ms(&d) < 1e-6, "steady: std 0");
	double worst = 0;
	for (double dt = 0; dt <= 1000; dt += 7.5) {
		double got = ctl_phi_value(&d, t + (uint64_t)(dt * 1e6));
		double want = phi_formula(dt, 100, 0, &p);
		if (isfinite(want))
			worst = fmax(worst, fabs(got - want) / fmax(1, want));
	}
	ok(worst < 1e-9, "steady: phi equals the formula over 0..1000 ms (max rel err %.2g)", worst);
	/* The logistic approximation stays near the exact normal tail. */
	double dmax = 0;
	for (double dt = 600; dt <= 800; dt += 10)
		dmax = fmax(dmax, fabs(ctl_phi_value(&d, t + (uint64_t)(dt * 1e6)) -
				       phi_exact(dt, 100, 0, &p)));
	ok(dmax < 0.5, "steady: within %.2f of the exact normal tail near threshold", dmax);
	/* min std floor: at dt = mean + pause, phi = -log10(1/2). */
	ok(fabs(ctl_phi_value(&d, t + 600 * MS) - log10(2)) < 1e-9,
	   "phi at mean+pause is log10(2)");
	/* Conviction time: solve phi = threshold by bisection on the formula. */
	double lo = 600, hi = 5000;
	for (int i = 0; i < 100; i++) {
		double mid = (lo + hi) / 2;
		if (phi_formula(mid, 100, 0, &p) >= p.threshold)
			hi = mid;
		else
			lo = mid;
	}
	ok(!ctl_phi_convicted(&d, t + (uint64_t)((hi - 0.5) * 1e6)) &&
	   ctl_phi_convicted(&d, t + (uint64_t)((hi + 0.5) * 1e6)),
	   "convicts at the predicted %.1f ms after the last heartbeat", hi);
	ok(hi < 1000, "steady 100 ms: conviction under 1 s");
	double prev = -1;
	bool mono = true;
	for (double dt = 0; dt < 3000; dt += 1) {
		double v = ctl_phi_value(&d, t + (uint64_t)(dt * 1e6));
		mono = mono && v >= prev && isfinite(v);
		prev = v;
	}
	ok(mono, "phi non-decreasing and finite while silent (3 s)");
	ok(ctl_phi_value(&d, t + 3600000 * MS) > 1000, "hours of silence: phi huge, not inf/NaN");

	/* Jittered trace: 100 ms + U[0,20) ms; no conviction, stats match. */
	ok(ctl_phi_init(&d, &p) == 0, "re-init");
	t = 5000 * MS;
	double iv[1000];
	uint64_t last = 0;
	unsigned false_conv = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t at = t + (uint64_t)i * 100 * MS + (uint64_t)(uni() * 20e6);
		for (uint64_t c = last ? last : at; last && c < at; c += MS)
			false_conv += ctl_phi_convicted(&d, c);
		ctl_phi_heartbeat(&d, at);
		if (last)
			iv[i] = (double)(at - last) / 1e6;
		last = at;
	}
	is_int(false_conv, 0, "jittered: no false conviction over 1000 heartbeats (1 ms checks)");
	double s = 0, q = 0;
	for (int i = 900; i < 1000; i++) {
		s += iv[i];
		q += iv[i] * iv[i];
	}
	double m = s / 100, sd = sqrt(q / 100 - m * m);
	ok(fabs(ctl_phi_mean_ms(&d) - m) < 1e-6 && fabs(ctl_phi_std_ms(&d) - sd) < 1e-6,
	   "jittered: window mean %.2f std %.2f match the last 100 intervals", m, sd);
	ok(fabs(ctl_phi_value(&d, last + 700 * MS) - phi_formula(700, m, sd, &p)) < 1e-6,
	   "jittered: phi equals the formula");

	/* Paused trace: a pause within acceptable_pause is tolerated. */
	ok(!ctl_phi_convicted(&d, last + 550 * MS), "pause of 550 ms (< 100 + 500): not convicted");
	ok(ctl_phi_convicted(&d, last + 2000 * MS), "pause of 2 s: convicted");
	ctl_phi_heartbeat(&d, last + 2000 * MS);
	ok(ctl_phi_value(&d, last + 2000 * MS) < 1e-3, "phi back to ~0 right after a heartbeat");

	/* Parameter validation. */
	struct ctl_phi_params b = p;
	b.window = 1;
	is_int(ctl_phi_init(&d, &b), -EINVAL, "window 1 refused");
	b = p;
	b.window = CTL_PHI_WINDOW_MAX + 1;
	is_int(ctl_phi_init(&d, &b), -EINVAL, "window above max refused");
	b = p;
	b.min_std_ms = NAN;
	is_int(ctl_phi_init(&d, &b), -EINVAL, "NaN min std refused");
	b = p;
	b.threshold = 0;
	is_int(ctl_phi_init(&d, &b), -EINVAL, "zero threshold refused");
	return tap_done();
}
