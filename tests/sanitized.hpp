// IRON_SANITIZED_BUILD: defined in a build under AddressSanitizer or ThreadSanitizer
// (scripts/test.sh's build-asan/, build-tsan/), where whole-model cases the Release build already
// checks are skipped.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define IRON_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define IRON_SANITIZED_BUILD 1
#endif
#endif
