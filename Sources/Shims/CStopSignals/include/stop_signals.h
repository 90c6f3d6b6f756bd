// Stop signals delivered through a pipe (the self-pipe pattern).
//
// A signal handler can do almost nothing safely, and it cannot carry context, so this shim keeps
// the one thing it needs (the pipe's write end) in a static and its handler only write(2)s the
// signal's number, one byte, to that pipe. The caller reads the pipe on a thread of its own.
//
// Unlike a libdispatch signal source, which on Linux installs its handler later, on its manager
// thread, the handler is in place when tapedeck_stop_signals_arm returns: a signal that arrives
// after that is never lost, whichever thread the kernel delivers it to.
//
// Signals that ask for something rather than stop (a marker, a trigger) can be delivered as a
// count instead (tapedeck_stop_signals_coalesce): a flood of them writes one byte, not one each.
#ifndef TAPEDECK_STOP_SIGNALS_H
#define TAPEDECK_STOP_SIGNALS_H

/// Makes the pipe: both ends close-on-exec, the write end non-blocking (a full pipe drops the
/// byte rather than stalling the thread the signal interrupted).
/// Returns 0, or -1 with errno set by pipe2(2).
/// Thread: any. Never blocks.
int tapedeck_stop_signals_pipe(int *read_fd, int *write_fd);

/// Installs the pipe-writing handler for `signals[0..<count]` (SA_RESTART; the signal is not
/// blocked for the process), except for a signal the process was started with ignored: that one
/// stays ignored (nohup ignores SIGHUP; a background job of a script ignores SIGINT).
/// `armed[i]` is set to 1 where the handler was installed, 0 where the signal stays ignored.
/// `write_fd` is the write end from tapedeck_stop_signals_pipe.
/// Returns 0, or -1 with errno set by sigaction(2) (handlers installed before the failure stay).
/// Thread: any; call once per arming. Never blocks.
int tapedeck_stop_signals_arm(int write_fd, const int *signals, int count, int *armed);

/// Delivers `signo` as a count rather than a byte per signal (call before arming it): the handler
/// adds one to the signal's count and writes its byte only when the count was 0, so however
/// many arrive, at most one byte waits in the pipe. The reader, given that byte, takes the count
/// with tapedeck_stop_signals_take. For request signals (a marker, a trigger), never for stops.
/// Thread: any. Never blocks.
void tapedeck_stop_signals_coalesce(int signo);

/// The number of `signo` signals that arrived since the last call (0 for a signal not
/// coalesced), resetting it: the next one writes a byte again.
/// Thread: the pipe's reader. Never blocks.
long tapedeck_stop_signals_take(int signo);

/// Restores the default action of `signals[0..<count]` (those tapedeck_stop_signals_arm armed;
/// a signal it left ignored must stay so) and forgets the pipe. A handler already
/// running may still write its byte, so the caller must not close the write end (its number could
/// be reused by another file by then); it tells its reader to stop through the pipe instead.
/// Thread: any. Never blocks.
void tapedeck_stop_signals_disarm(const int *signals, int count);

#endif
