#ifndef TAPEDECK_CALSA_SHIM_H
#define TAPEDECK_CALSA_SHIM_H
#include <alsa/asoundlib.h>
#include <stdarg.h>
#include <stdio.h>

/*
 * Routing ALSA's own error messages into swift-log.
 *
 * ALSA reports problems through one process-wide handler whose type is variadic
 * (`snd_lib_error_handler_t`), which Swift cannot implement or call. The trampoline below has that
 * type: it formats the message with vsnprintf into a stack buffer and hands the finished text to a
 * plain, non-variadic C function pointer that Swift sets (a non-capturing `@convention(c)` closure).
 * The pointer is stored and loaded atomically, so setting it from any thread is safe. With no target
 * set, messages are dropped (never printed to stderr).
 */
typedef void (*tapedeck_alsa_log_fn)(const char *file, int line, const char *function, int err,
                                     const char *message);

static tapedeck_alsa_log_fn tapedeck_alsa_log_target = 0;

static inline void tapedeck_alsa_error_trampoline(const char *file, int line, const char *function,
                                                  int err, const char *fmt, ...) {
    tapedeck_alsa_log_fn target = __atomic_load_n(&tapedeck_alsa_log_target, __ATOMIC_ACQUIRE);
    if (!target) return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt ? fmt : "", ap);
    va_end(ap);
    target(file ? file : "", line, function ? function : "", err, message);
}

/* Installs the trampoline as ALSA's error handler and sets where it forwards to (NULL: drop). */
static inline int tapedeck_alsa_set_error_log(tapedeck_alsa_log_fn fn) {
    __atomic_store_n(&tapedeck_alsa_log_target, fn, __ATOMIC_RELEASE);
    return snd_lib_error_set_handler(tapedeck_alsa_error_trampoline);
}

#endif
