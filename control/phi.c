/* Phi-accrual failure detector.
 *
 * Hayashibara et al., "The phi accrual failure detector" (SRDS 2004): instead
 * of a boolean, the detector outputs phi(t) = -log10(P_later(t - t_last)),
 * where P_later is the probability that the next heartbeat arrives later than
 * now given the inter-arrival times seen so far. We follow Akka's variant
 * (akka.remote.PhiAccrualFailureDetector, which cites the paper): the window
 * is modelled as a normal distribution N(mean + acceptable_pause,
 * max(std, min_std)), and its CDF is approximated by the logistic function
 *   F(y) ~= 1 / (1 + exp(-y * (1.5976 + 0.070566 y^2)))
 * (Bowling, Khasawneh, Kaewkuekool, Cho: "A logistic approximation to the
 * cumulative normal distribution", 2009). Like Akka, the window starts from a
 * first-interval estimate (mean m, std m/4 as the two samples m +- m/4).
 */
#include "zbmd/control.h"
#include "zbmd/common.h"

#include <math.h>
#include <string.h>

int ctl_phi_init(struct ctl_phi *d, const struct ctl_phi_params *p)
{
	ZB_ASSERT(d != NULL && p != NULL);
	if (p->window < 2 || p->window > CTL_PHI_WINDOW_MAX ||
	    !(p->min_std_ms > 0) || !(p->acceptable_pause_ms >= 0) ||
	    !(p->first_interval_ms > 0) || !(p->threshold > 0))
		return -EINVAL;
	memset(d, 0, offsetof(struct ctl_phi, win));
	d->p = *p;
	ZB_ASSERT(d->n == 0 && d->last_ns == 0);
	return 0;
}

static void add_sample(struct ctl_phi *d, double ms)
{
	if (d->n == d->p.window) {
		double old = d->win[d->head];
		d->sum -= old;
		d->sumsq -= old * old;
	} else {
		d->n++;
	}
	d->win[d->head] = ms;
	d->head = (d->head + 1) % d->p.window;
	d->sum += ms;
	d->sumsq += ms * ms;
	/* Running sums drift; recompute them exactly once per window turn. */
	if (d->head == 0) {
		double s = 0, q = 0;
		for (uint32_t i = 0; i < d->n; i++) {
			s += d->win[i];
			q += d->win[i] * d->win[i];
		}
		d->sum = s;
		d->sumsq = q;
	}
}

void ctl_phi_heartbeat(struct ctl_phi *d, uint64_t now_ns)
{
	ZB_DASSERT(d != NULL);
	if (d->last_ns == 0) {
		double m = d->p.first_interval_ms, s = m / 4;
		add_sample(d, m - s);
		add_sample(d, m + s);
	} else if (now_ns >= d->last_ns) {
		add_sample(d, (double)(now_ns - d->last_ns) / 1e6);
	}
	if (now_ns >= d->last_ns)
		d->last_ns = now_ns ? now_ns : 1;
	d->arrivals++;
}

double ctl_phi_mean_ms(const struct ctl_phi *d)
{
	return d->n ? d->sum / d->n : 0;
}

double ctl_phi_std_ms(const struct ctl_phi *d)
{
	if (!d->n)
		return 0;
	double m = d->sum / d->n, var = d->sumsq / d->n - m * m;
	return var > 0 ? sqrt(var) : 0;
}

double ctl_phi_value(const struct ctl_phi *d, uint64_t now_ns)
{
	ZB_DASSERT(d != NULL);
	if (d->last_ns == 0 || now_ns <= d->last_ns)
		return 0;
	double dt = (double)(now_ns - d->last_ns) / 1e6;
	double mean = ctl_phi_mean_ms(d) + d->p.acceptable_pause_ms;
	double std = fmax(ctl_phi_std_ms(d), d->p.min_std_ms);
	double y = (dt - mean) / std;
	double z = y * (1.5976 + 0.070566 * y * y);
	double phi;
	if (dt > mean) {
		/* -log10(e / (1 + e)) with e = exp(-z), in the log domain so
		 * that it stays finite when e underflows. */
		phi = z / M_LN10 + log10(1 + exp(-z));
	} else {
		double e = exp(-z);
		phi = -log10(1 - 1 / (1 + e));
	}
	if (!(phi > 0))    /* rounding to -0 or below zero, or NaN */
		phi = 0;
	return phi;
}

bool ctl_phi_convicted(const struct ctl_phi *d, uint64_t now_ns)
{
	return ctl_phi_value(d, now_ns) >= d->p.threshold;
}

void ctl_phi_params_from_config(const struct zb_config *cfg,
				struct ctl_phi_params *p)
{
	ZB_ASSERT(cfg != NULL && p != NULL);
	p->window = cfg->control.phi_window;
	p->min_std_ms = cfg->control.phi_min_std_ms;
	p->acceptable_pause_ms = cfg->control.acceptable_pause_ms;
	p->first_interval_ms = cfg->control.heartbeat_ms;
	p->threshold = cfg->control.phi_threshold;
	/* no clamp: the schema bounds phi_window to 2..CTL_PHI_WINDOW_MAX,
	 * so a window the loader let through is used as written, and one
	 * set by code is refused by ctl_phi_init, not silently shortened */
}
