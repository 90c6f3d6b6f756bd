#ifndef TAPEDECK_JACK_STREAM_H
#define TAPEDECK_JACK_STREAM_H

// A JACK client with one port per channel and a lock-free ring between JACK's process thread
// (real time: it only copies, counts and posts a semaphore) and Tapedeck's device thread. The
// header does not include JACK's, so the Swift module CJACK stays the one that does.

#include <stdint.h>

typedef struct tapedeck_jack_stream tapedeck_jack_stream;

enum { TAPEDECK_JACK_CAPTURE = 0, TAPEDECK_JACK_PLAYBACK = 1 };

/// Opens a client on `server` (NULL or "" for the default, as JACK_DEFAULT_SERVER says), never
/// starting a server, and registers `channels` ports: `in_1`… for capture, `out_1`… for playback.
/// The ring holds `ring_frames` frames. Not activated yet. On failure returns NULL with JACK's
/// status bits in `*status` (0 when the failure was not JACK's: out of memory, a port refused).
tapedeck_jack_stream *tapedeck_jack_stream_open(const char *server, const char *client_name, int direction,
                                                int channels, uint32_t ring_frames, int *status);

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

/// Capture: from now on the process callback fills the ring (before, it discards). Playback:
/// from now on it plays the ring, and a ring running dry counts as an underrun.
void tapedeck_jack_stream_start(tapedeck_jack_stream *s);
/// Playback: the last frames are written; a ring running dry from now on is the end, not an underrun.
void tapedeck_jack_stream_finish(tapedeck_jack_stream *s);

/// Frames ready to read (capture) or room to write (playback).
uint32_t tapedeck_jack_stream_available(const tapedeck_jack_stream *s);
/// Capture: copies up to `max_frames` interleaved frames out of the ring, stopping before a
/// hole; `*lost_before` gets the frames JACK never delivered just before them (ring full, or
/// cycles the server skipped). Returns the frames copied.
uint32_t tapedeck_jack_stream_read(tapedeck_jack_stream *s, float *destination, uint32_t max_frames, uint64_t *lost_before);
/// Playback: copies up to `frames` interleaved frames into the ring. Returns the frames copied.
uint32_t tapedeck_jack_stream_write(tapedeck_jack_stream *s, const float *source, uint32_t frames);

/// Sleeps until the process callback has made `frames` available (see above), the server shut
/// the client down, or `timeout_ns` passed. Returns 0 when woken, 1 on timeout.
int tapedeck_jack_stream_wait(tapedeck_jack_stream *s, uint32_t frames, uint64_t timeout_ns);

/// Process cycles run since activation; frames of silence played because the ring ran dry
/// (playback); xruns the server reported; frames lost (capture, all holes).
uint64_t tapedeck_jack_stream_cycles(const tapedeck_jack_stream *s);
uint64_t tapedeck_jack_stream_underrun_frames(const tapedeck_jack_stream *s);
uint32_t tapedeck_jack_stream_xruns(const tapedeck_jack_stream *s);
uint64_t tapedeck_jack_stream_lost_frames(const tapedeck_jack_stream *s);
/// The server's estimate of the current frame time, and the frame time of the first cycle after start.
uint32_t tapedeck_jack_stream_frame_time(const tapedeck_jack_stream *s);
uint32_t tapedeck_jack_stream_start_frame(const tapedeck_jack_stream *s);
/// Frames delivered into the ring (capture) or played from it (playback) since start, holes included.
uint64_t tapedeck_jack_stream_frames_done(const tapedeck_jack_stream *s);

/// Whether the server shut the client down (stopped, killed, or it zombified the client), and why.
int tapedeck_jack_stream_is_shut_down(const tapedeck_jack_stream *s);
const char *tapedeck_jack_stream_shutdown_reason(const tapedeck_jack_stream *s);

/// Deactivates and closes the client and frees everything. The stream pointer is then invalid.
void tapedeck_jack_stream_close(tapedeck_jack_stream *s);

/// A plain client (for listing ports), never starting a server: a `jack_client_t *`, or NULL
/// with JACK's status bits in `*status`. (jack_client_open is variadic, which Swift cannot call.)
void *tapedeck_jack_client_open(const char *server, const char *client_name, int *status);

/// Sends libjack's messages to a buffer instead of stderr (it prints there by default, even for a
/// server that is merely not running). Copies the last error into `buffer` and returns its length.
void tapedeck_jack_quiet(void);
int tapedeck_jack_last_error(char *buffer, int size);

#endif
