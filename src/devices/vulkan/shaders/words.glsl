// The per-call words as every operator shader reads them: a shader defines WORDS_BINDING (its
// last binding) and includes this file. The host writes the words before each submit; the
// recorded commands never change.
layout(std430, set = 0, binding = WORDS_BINDING) readonly buffer Words { int words[]; };

// A word as the recorder encoded it (vulkan::shader_word): a constant when >= 0, else per-call
// word -(w + 1).
int word(int w) { return w >= 0 ? w : words[-w - 1]; }
