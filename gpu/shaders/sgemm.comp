#version 450
// C = alpha * op(A) op(B) + beta * C, column-major, 16x16 shared-memory
// tiles.  beta == 0 means C is not read (BLAS rule: NaNs in C vanish).
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, set = 0, binding = 0) buffer Cbuf { float c[]; };
layout(std430, set = 0, binding = 1) readonly buffer Abuf { float a[]; };
layout(std430, set = 0, binding = 2) readonly buffer Bbuf { float b[]; };
layout(push_constant) uniform PC {
	uint c_off, a_off, b_off;
	int m, n, k, lda, ldb, ldc;
	uint ta, tb;
	float alpha, beta;
} pc;

shared float As[16][17];
shared float Bs[16][17];

float opA(int i, int p)
{
	return pc.ta != 0u ? a[pc.a_off + uint(p + i * pc.lda)]
			   : a[pc.a_off + uint(i + p * pc.lda)];
}

float opB(int p, int j)
{
	return pc.tb != 0u ? b[pc.b_off + uint(j + p * pc.ldb)]
			   : b[pc.b_off + uint(p + j * pc.ldb)];
}

void main()
{
	int lx = int(gl_LocalInvocationID.x), ly = int(gl_LocalInvocationID.y);
	int i = int(gl_WorkGroupID.x) * 16 + lx;
	int j = int(gl_WorkGroupID.y) * 16 + ly;
	float acc = 0.0;
	for (int t = 0; t < pc.k; t += 16) {
		As[lx][ly] = (i < pc.m && t + ly < pc.k) ? opA(i, t + ly) : 0.0;
		Bs[lx][ly] = (t + lx < pc.k && j < pc.n) ? opB(t + lx, j) : 0.0;
		barrier();
		for (int p = 0; p < 16; p++)
			acc += As[lx][p] * Bs[p][ly];
		barrier();
	}
	if (i < pc.m && j < pc.n) {
		uint ci = pc.c_off + uint(i + j * pc.ldc);
		float r = pc.alpha * acc;
		if (pc.beta != 0.0)
			r += pc.beta * c[ci];
		c[ci] = r;
	}
}
