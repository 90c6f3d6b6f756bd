#ifndef TAPEDECK_PIPEWIRE_H
#define TAPEDECK_PIPEWIRE_H

// A connection to a PipeWire daemon on a loop the calling thread iterates itself: the registry's
// audio nodes, the default nodes, and at most one stream. Every function runs on the thread that
// connected, and so do the registry's and the stream's events (inside tapedeck_pw_iterate). The
// stream's process callback alone runs on PipeWire's data thread (real time): it copies between
// PipeWire's buffers and a tapedeck_ring (CRingStream), declares what the graph clock says never
// arrived as lost, sets the ring's clock and counts a cycle. The header does not include PipeWire's.

#include <stdint.h>
#include "tapedeck_ring.h"

typedef struct tapedeck_pw tapedeck_pw;

enum { TAPEDECK_PW_CAPTURE = 0, TAPEDECK_PW_PLAYBACK = 1 };

/// Connects to the daemon `remote` (NULL or "" for the default: $PIPEWIRE_REMOTE, else
/// pipewire-0) and waits up to `timeout_ms` for the registry's objects and the default nodes.
/// Returns NULL with a negative errno in `*error` when no daemon answers.
tapedeck_pw *tapedeck_pw_connect(const char *remote, int timeout_ms, int *error);

/// Runs the loop once, waiting up to `timeout_ms` for an event. Returns what pw_loop_iterate returns.
int tapedeck_pw_iterate(tapedeck_pw *c, int timeout_ms);

/// The audio nodes seen at connection: their count, and a property of the i-th (NULL when unset).
int tapedeck_pw_node_count(const tapedeck_pw *c);
uint32_t tapedeck_pw_node_id(const tapedeck_pw *c, int i);
const char *tapedeck_pw_node_property(const tapedeck_pw *c, int i, const char *key);
/// The ports seen at connection (node.id, port.direction "in"/"out", audio.channel, port.monitor).
int tapedeck_pw_port_count(const tapedeck_pw *c);
const char *tapedeck_pw_port_property(const tapedeck_pw *c, int i, const char *key);
/// The node name the session manager calls the default source (TAPEDECK_PW_CAPTURE) or sink
/// (TAPEDECK_PW_PLAYBACK), or "" when it names none.
const char *tapedeck_pw_default_node(const tapedeck_pw *c, int direction);

/// Whether the connection is lost (daemon gone, stream failed, target node removed), and why.
int tapedeck_pw_is_lost(const tapedeck_pw *c);
const char *tapedeck_pw_lost_reason(const tapedeck_pw *c);

/// Opens the stream: F32 interleaved at `rate` with the channels of `ring`, at `positions`
/// (Tapedeck's speaker indices: 0 = front left … 17 = top back right, as a WAVE channel mask orders
/// them; NULL or -1 entries for channels with no position), linked by the session manager to the
/// node with object.serial `target_serial`, whose registry id `target_id` is watched: its removal
/// is a loss (and closes the ring). `capture_sink` records what a sink plays. The process callback
/// pushes into `ring` (capture) or pulls from it (playback) once the ring is started; the ring
/// must outlive the stream. Returns 0 or a negative errno.
int tapedeck_pw_stream_open(tapedeck_pw *c, int direction, const char *node_name, const char *description,
                            const char *target_serial, uint32_t target_id, int capture_sink,
                            uint32_t rate, const int32_t *positions, tapedeck_ring *ring);

/// The stream's state (pw_stream_state: -1 error, 0 unconnected, 1 connecting, 2 paused, 3 streaming)
/// and its error text ("" when none).
int tapedeck_pw_stream_state(const tapedeck_pw *c);
const char *tapedeck_pw_stream_error(const tapedeck_pw *c);
/// The links of the stream's node the registry announced (made by the session manager).
int tapedeck_pw_stream_links(const tapedeck_pw *c);
/// The graph clock's rate (0 until the stream's first cycle).
uint32_t tapedeck_pw_graph_rate(const tapedeck_pw *c);
/// Frames the last process cycle carried (the graph's quantum as the stream sees it).
uint32_t tapedeck_pw_stream_quantum(const tapedeck_pw *c);
/// The loop's descriptor: readable when tapedeck_pw_iterate has events to run.
int tapedeck_pw_loop_fd(const tapedeck_pw *c);

/// Playback, once the ring ran empty after tapedeck_ring_finish: asks PipeWire to play out what
/// it holds; tapedeck_pw_stream_drained turns true (inside tapedeck_pw_iterate) when it did.
void tapedeck_pw_stream_drain(tapedeck_pw *c);
int tapedeck_pw_stream_drained(const tapedeck_pw *c);

/// Destroys the stream (if any), disconnects and frees everything.
void tapedeck_pw_disconnect(tapedeck_pw *c);

/// The linked libpipewire's version, e.g. "0.3.65".
const char *tapedeck_pw_library_version(void);

#endif
