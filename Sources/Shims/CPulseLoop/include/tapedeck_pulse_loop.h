#ifndef TAPEDECK_PULSE_LOOP_H
#define TAPEDECK_PULSE_LOOP_H

#include <stdint.h>

/// A single-threaded implementation of libpulse's main loop API (`pa_mainloop_api`), run by the
/// thread that owns it.
///
/// libpulse's own `pa_mainloop` writes a byte to a wake-up pipe whenever an event is added or
/// re-armed, even from inside its own dispatch on its own thread, and reads it back before the
/// next poll: several extra system calls and an extra poll for every packet the server sends (a
/// 4 s recording at 250 ms fragments made 330 writes, 171 reads and 85 polls more).
/// This loop has no wake-up pipe, because nothing outside the owning thread ever touches it.
/// Semantics otherwise follow `pa_mainloop`: enabled deferred events run instead of polling; time
/// events fire once and are then disabled; events are freed after the iteration that released them.
typedef struct tapedeck_pulse_loop tapedeck_pulse_loop;

/// A new loop, or NULL when out of memory.
tapedeck_pulse_loop *tapedeck_pulse_loop_new(void);

/// The loop's `pa_mainloop_api *` (for `pa_context_new`), as an untyped pointer so that this header
/// does not need libpulse's.
void *tapedeck_pulse_loop_api(tapedeck_pulse_loop *loop);

/// One iteration: runs enabled deferred events if there are any; otherwise polls the events' file
/// descriptors for at most `timeout_usec` microseconds (less when a time event is due sooner), then
/// runs the time events that are due and the I/O events that are ready.
/// Returns the number of callbacks run, or -1 when poll failed (other than by EINTR).
int tapedeck_pulse_loop_iterate(tapedeck_pulse_loop *loop, int64_t timeout_usec);

/// Sleeps up to `timeout_usec` microseconds, waking early only when one of the I/O events' file
/// descriptors hangs up or fails (the server went away): data arriving does not wake it, and no
/// callback runs. A caller then runs `tapedeck_pulse_loop_iterate` to take what came.
/// Returns 1 when a descriptor hung up or failed, 0 when the time ran out (or a signal ended the
/// wait), -1 when poll failed.
int tapedeck_pulse_loop_doze(tapedeck_pulse_loop *loop, int64_t timeout_usec);

/// Frees every event (running their destroy callbacks) and the loop.
void tapedeck_pulse_loop_free(tapedeck_pulse_loop *loop);

#endif
