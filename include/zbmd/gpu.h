/* zbmd/gpu.h — GPU backends (cpu, cuda, hip, vulkan), device memory pools,
 * tensors, and the host-side reduction used by the collectives.
 *
 * gpu/ builds and tests with no DPDK and no config module: callers pass a
 * small options struct (the CLI maps the [gpu] section onto it).
 *
 * Errors: every int function returns 0 or a negative errno / ZB_ERR_* code
 * (see common.h); nothing here prints or exits.
 */
#ifndef ZBMD_GPU_H
#define ZBMD_GPU_H

#include "zbmd/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- host reduction (used by the collectives on host buffers) ----------
 *
 * gpu_host_reduce: dst[i] = dst[i] OP src[i] for i in [0, count).
 *   ZB_AVG accumulates a sum; the caller scales by 1/n at the end with
 *   gpu_host_scale.  f16/bf16 are computed in f32 and rounded back to
 *   nearest-even (zb_f32_to_f16 / zb_f32_to_bf16).  Integer sum and prod wrap
 *   modulo 2^bits (no undefined behaviour).  min/max on floats: a NaN in dst
 *   is kept, a NaN in src is ignored (the SIMD minps/maxps rule).
 *   dst and src may be the same buffer; a partial overlap is -EINVAL.
 *   count == 0 is a no-op (the pointers may then be NULL).
 * Returns 0, or -EINVAL (NULL buffer with count > 0, bad dtype/op, partial
 * overlap); dst is unaltered on error.  Thread-safe (no shared state).
 */
int gpu_host_reduce(void *dst, const void *src, size_t count,
		    enum zb_dtype dtype, enum zb_redop op);

/* gpu_host_scale: buf[i] = buf[i] * factor.
 *   f32: multiplied by (float)factor; f64: by factor; f16/bf16: in f32, then
 *   rounded back; i32/i64: computed in double, rounded to nearest (ties away
 *   from zero) and saturated to the type's range.
 * Returns 0 or -EINVAL (NULL with count > 0, bad dtype, factor not finite). */
int gpu_host_scale(void *buf, size_t count, enum zb_dtype dtype, double factor);

#endif /* ZBMD_GPU_H */
