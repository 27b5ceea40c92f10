// Activation functions as the CPU's kernels and references compute them, for operator shaders.

float silu(float x) { return x / (1.0 + exp(-x)); }

// erf by Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7): GLSL has none.
float erf_approx(float x) {
  const float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  const float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return x >= 0.0 ? y : -y;
}

float gelu(float x) { return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476)); }

float gelu_tanh(float x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
