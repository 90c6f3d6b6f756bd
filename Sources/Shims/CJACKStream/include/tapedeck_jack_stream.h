#ifndef TAPEDECK_JACK_STREAM_H
#define TAPEDECK_JACK_STREAM_H

// A JACK client with one port per channel whose process callback (JACK's real-time thread)
// copies between the ports and a tapedeck_ring (CRingStream): it pushes or pulls, declares the
// cycles the server skipped as lost, sets the ring's clock and counts a cycle. Nothing else runs
// there. The header does not include JACK's, so the Swift module CJACK stays the one that does.

#include <stdint.h>
#include "tapedeck_ring.h"

typedef struct tapedeck_jack_stream tapedeck_jack_stream;

/// Opens a client on `server` (NULL or "" for the default, as JACK_DEFAULT_SERVER says), never
/// starting a server, and registers one port per channel of `ring`: `in_1`… when the ring is a
/// capture ring, `out_1`… for playback. Not activated yet; the ring must outlive the client. On
/// failure returns NULL with JACK's status bits in `*status` (0 when the failure was not JACK's:
/// out of memory, a port refused).
tapedeck_jack_stream *tapedeck_jack_stream_open(const char *server, const char *client_name, int capture,
                                                tapedeck_ring *ring, int *status);

/// The server's sample rate and buffer size, the client's name (JACK may have made it unique),
/// a port's full name (`tapedeck:in_1`), and the client (a `jack_client_t *`) for port queries.
uint32_t tapedeck_jack_stream_sample_rate(const tapedeck_jack_stream *s);
uint32_t tapedeck_jack_stream_buffer_size(const tapedeck_jack_stream *s);
const char *tapedeck_jack_stream_client_name(const tapedeck_jack_stream *s);
const char *tapedeck_jack_stream_port_name(const tapedeck_jack_stream *s, int channel);
void *tapedeck_jack_stream_client(const tapedeck_jack_stream *s);

/// Activates the client (its process callback starts running). Returns JACK's status (0: done).
int tapedeck_jack_stream_activate(tapedeck_jack_stream *s);
/// Connects `channel`'s port with `other` (capture: other -> ours; playback: ours -> other).
/// Returns 0, EEXIST when already connected, or JACK's error.
int tapedeck_jack_stream_connect(tapedeck_jack_stream *s, int channel, const char *other);

/// Xruns the server reported; whether it shut the client down (stopped, killed, or it zombified
/// the client: the ring is then closed), and why.
uint32_t tapedeck_jack_stream_xruns(const tapedeck_jack_stream *s);
int tapedeck_jack_stream_is_shut_down(const tapedeck_jack_stream *s);
const char *tapedeck_jack_stream_shutdown_reason(const tapedeck_jack_stream *s);

/// Deactivates and closes the client and frees it (not the ring). The pointer is then invalid.
void tapedeck_jack_stream_close(tapedeck_jack_stream *s);

/// A plain client (for listing ports), never starting a server: a `jack_client_t *`, or NULL
/// with JACK's status bits in `*status`. (jack_client_open is variadic, which Swift cannot call.)
void *tapedeck_jack_client_open(const char *server, const char *client_name, int *status);

/// Sends libjack's messages to a buffer instead of stderr (it prints there by default, even for a
/// server that is merely not running). Copies the last error into `buffer` and returns its length.
void tapedeck_jack_quiet(void);
int tapedeck_jack_last_error(char *buffer, int size);

#endif
