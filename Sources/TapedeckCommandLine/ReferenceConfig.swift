import TapedeckAssembly
import TapedeckCore

/// The reference configuration (every key, commented, with its default), printed by
/// `tapedeck config example` and the start of what `config init` writes. The same text as
/// Configuration/tapedeck.yaml in the source tree (a test keeps them equal).
enum ReferenceConfig {
    /// The reference text for the running command's catalog: Tapedeck's own, with a commented
    /// block for each plugin the program adds (``TapedeckCLI``), made from its declarations.
    static var current: String { text(for: BoundCatalog.current) }

    /// ``text`` with a block for each plugin of `catalog` that Tapedeck's own catalog lacks, at the
    /// end of its role's section (`capture:`, `playback:`, `encoder:`, `storage:`, `sync:`).
    /// - Thread: any. Never blocks.
    static func text(for catalog: PluginCatalog) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for entry in catalog.added(to: .builtIn) {
            guard let section = sectionName[entry.role], !entry.settings.isEmpty,
                  let start = lines.firstIndex(of: section + ":") else { continue }
            // The section ends at its last indented line, before the blank line that follows it.
            var end = start + 1
            while end < lines.count, lines[end].hasPrefix(" ") { end += 1 }
            lines.insert(contentsOf: block(for: entry), at: end)
        }
        return lines.joined(separator: "\n")
    }

    /// Each role's section in the config file (decoders have none: they read what encoders write).
    static let sectionName: [PluginRole: String] = [.capture: "capture", .playback: "playback", .encoder: "encoder", .storage: "storage", .remote: "sync"]

    /// The commented settings of one added plugin, indented for its place under its section.
    static func block(for entry: PluginEntry) -> [String] {
        var lines = comment("Settings of the \(entry.name) \(entry.role.rawValue) plugin (added by this program): \(entry.summary)", indent: "  ")
        lines.append("  \(entry.name):")
        for setting in entry.settings {
            switch setting.type {
            case .string, .path:
                lines += comment(setting.help, indent: "    ")
                lines.append("    \(setting.key): \(yamlScalar(setting.defaultValue))")
            default:
                lines += comment(setting.help + " (\(setting.type.summary))", indent: "    ")
                lines.append("    \(setting.key): \(setting.defaultValue)")
            }
        }
        return lines
    }

    /// `text` as comment lines of at most 80 columns, broken between words.
    static func comment(_ text: String, indent: String) -> [String] {
        let prefix = indent + "# "
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && prefix.count + line.count + 1 + word.count > 80 {
                lines.append(prefix + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(prefix + line) }
        return lines
    }

    /// A default as YAML writes it: plain when YAML reads it back as the same text, else quoted.
    static func yamlScalar(_ value: String) -> String {
        let plain = !value.isEmpty && value.first.map { !"!&*-?[]{}|>'\"%@`#,:".contains($0) && !$0.isWhitespace } == true
            && value.last.map { !$0.isWhitespace } == true && !value.contains(": ") && !value.contains(" #")
            && !["null", "~", "true", "false", "yes", "no", "on", "off"].contains(value.lowercased())
        if plain { return value }
        let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "\"" + escaped + "\""
    }

    static let text = #"""
# Tapedeck configuration: every key, with its default.
#
# Copy this file to ~/.config/tapedeck/config.yaml (or
# /etc/tapedeck/config.yaml, or point --config / $TAPEDECK_CONFIG at it) and
# change what your machine needs.
#
# Precedence, highest first:
#   1. --set KEY=VALUE on the command line    e.g. --set format.channels=1
#   2. environment variables TAPEDECK_<KEY>   e.g. TAPEDECK_CAPTURE_BACKEND=null
#      (the key path upper-cased, dots and dashes as underscores)
#   3. this file
#   4. the built-in defaults shown here
#
# Unknown keys, wrong types and out-of-range values are errors that name the
# line; settings of plugins that are not selected are checked too.
# `tapedeck backends` lists every plugin compiled in, with its settings;
# `tapedeck devices` lists the device names each audio backend accepts.

capture:
  # The capture plugin: alsa, pulse, jack, pipewire, stream, rtp or null (a
  # test signal, no sound card needed). Unset, `tapedeck record` uses a running
  # JACK server, else a running PipeWire, else the PulseAudio server's default
  # source when one answers, else ALSA's default device; never null, stream or
  # rtp. `tapedeck config show` says which it chose.
  # backend: pulse
  # Frames per device read (16 to 65536): larger costs less CPU; smaller makes
  # the meter and a stop more prompt (8192 frames at 48 kHz is 171 ms; arecord's
  # default period is 125 ms).
  period-frames: 8192
  # Seconds of audio buffered between the device thread and the disk writer
  # before frames are dropped (an overrun: counted, timestamped, filled with
  # silence, and reported).
  buffer-seconds: 2
  # When the device is lost mid-run (unplugged, the server gone), end the take,
  # wait for the device and go on in a new take (record --resume).
  resume: false
  # Measure each take's EBU R128 loudness while recording, on the writer thread
  # (about 7 ms of CPU per second of 48 kHz stereo). Off: `tapedeck loudness`
  # measures takes later.
  measure-loudness: true
  # Settings of the null backend (generated audio, no sound card needed).
  null:
    # silence, sine, noise, or counter (a frame-counter pattern for tests).
    signal: sine
    # Sine frequency in hertz.
    frequency: 440
    # Peak level of sine and noise, 0 to 1.
    level: 0.5
    # Seed of the noise generator.
    seed: 1
    # true: deliver audio in real time. false: as fast as it is written.
    paced: true
    # Fault injection for tests: a device xrun at this frame (-1: never) losing
    # this many frames.
    overrun-at-frame: -1
    overrun-frames: 1024
    # Fault injection for tests: the device disappears at this frame (-1:
    # never).
    device-loss-at-frame: -1
    # Fault injection for tests: seconds after the loss when the device can be
    # opened again (-1: never).
    device-back-after: -1
    # Fault injection for tests: the device hangs at this frame, its reads never
    # returning, as a driver that stops answering (-1: never).
    freeze-at-frame: -1
    # Switch the signal off and on, for sound-activated runs: seconds off, on,
    # off… ("2,1,3,0.5"), repeating; empty: always on.
    gate: ""
  # Settings of the ALSA backend (libasound).
  alsa:
    # Any ALSA PCM name: default, hw:CARD=USB,DEV=0, plughw:CARD=USB,DEV=0
    # (converts rate and depth), pulse, or a name from ~/.asoundrc.
    device: default
    # Buffer size in periods (2 to 32).
    periods: 4
  # Settings of the PulseAudio backend (libpulse).
  pulse:
    # Empty: the usual server lookup. Else a socket path, unix:PATH or
    # tcp:host:port.
    server: ""
    # Empty: the server's default source. Else a source name, @DEFAULT_SOURCE@,
    # or a monitor such as alsa_output.pci-0000_00_1f.3.analog-stereo.monitor.
    device: ""
    client-name: Tapedeck
    stream-name: Tapedeck recording
    # Capture fragment size in milliseconds (1 to 2000): how often audio
    # arrives. Smaller costs more CPU; larger lets a stop come up to one
    # fragment late (the recorder acts on a stop between fragments). Nothing up
    # to the stop is lost either way.
    fragment-ms: 250
  # Settings of the JACK backend (libjack). JACK records at the server's rate
  # only: set format.sample-rate to it (`tapedeck devices --backend jack` shows
  # it).
  jack:
    # Empty: the default server ($JACK_DEFAULT_SERVER, else "default"). Else the
    # name it was started with (jackd -n NAME).
    server: ""
    client-name: tapedeck
    # The ports to record from, one per channel in order. Empty: the physical
    # capture ports (system:capture_1…). Else a client's name (system), port
    # names separated by commas, or a regular expression
    # ("system:capture_[12]"); one port feeds every channel. none: connect
    # nothing (connect tapedeck:in_1… with qjackctl, jack_connect or pw-link).
    device: ""
  # Settings of the PipeWire backend (libpipewire). PipeWire converts rate,
  # sample format and channel positions, so any format records.
  pipewire:
    # Empty: the default daemon ($PIPEWIRE_REMOTE, else pipewire-0 in
    # $XDG_RUNTIME_DIR). Else a socket name or path.
    remote: ""
    # The stream's name in the graph (pw-top, pw-link and qpwgraph show it).
    node-name: tapedeck
    # The node to record from, by node.name or object.serial as
    # `pw-record --target` takes it (`tapedeck devices --backend pipewire` lists
    # them). Empty: the default source. A sink records what it plays.
    device: ""
  # Settings of the stream backend: an Icecast, Shoutcast or HTTP stream (Ogg
  # Opus, Ogg Vorbis, Ogg FLAC, FLAC, MP3, WAV), decoded in-process. Never chosen
  # by itself; `-D http://…` chooses it. The stream's rate and channels (and
  # depth, for FLAC and WAV) make the take's unless format.* chooses them.
  stream:
    # No audio for this long (no bytes, or none that decode) is a lost stream:
    # the take ends interrupted, and with resume recording goes on when it is
    # back.
    stall-after: 5s
    # While a lost stream is awaited, the wait between tries: FIRST..LONGEST,
    # doubling.
    reconnect: 1s..30s
    # The environment variable holding the stream's password (the user is the
    # URL's, http://USER@host/…); never logged.
    password-env: ""
    # The stream's URL, http:// or https://. A password in it is sent, never
    # shown.
    device: ""
  # Settings of the rtp backend: an RTP stream of L16 or L24 (AES67 and other
  # senders), from an SDP file or an address. `tapedeck devices --backend rtp`
  # lists the streams SAP announces. Never chosen by itself; `-D rtp://…`
  # chooses it.
  rtp:
    # The session description (SDP) file the sender publishes: address, port,
    # payload type and encoding come from it.
    sdp: ""
    # Without sdp: the payload, L16 or L24/RATE/CHANNELS.
    encoding: L24/48000/2
    # Without sdp: the RTP payload type of the audio (0 to 127).
    payload-type: 97
    # The network interface a multicast stream arrives on (e.g. eth1); empty
    # for the system's choice.
    interface: ""
    # How long a missing packet is waited for before its frames become a hole
    # (silence where it was, counted as an overrun).
    jitter-buffer: 20ms
    # No packets for this long is a lost stream (as for stream.stall-after).
    stall-after: 5s
    # Where `tapedeck devices --backend rtp` listens for SAP announcements.
    sap: 239.255.255.255:9875
    # The stream's address, rtp://ADDRESS:PORT (a multicast group or this
    # machine's address); empty with sdp.
    device: ""

playback:
  # The playback plugin: alsa, pulse, jack, pipewire or null. Unset,
  # `tapedeck play` uses a running JACK server, else a running PipeWire, else
  # the PulseAudio server's default sink when one answers, else ALSA's default
  # device.
  # backend: pulse
  # Frames per device write; a device that buffers four of them (alsa.periods)
  # holds 200 ms at 48 kHz, which does not run dry under load.
  period-frames: 2400
  null:
    paced: true
  alsa:
    device: default
    periods: 4
  pulse:
    server: ""
    # Empty: the server's default sink; else a sink name or @DEFAULT_SINK@.
    device: ""
    client-name: Tapedeck
    stream-name: Tapedeck playback
    # Target latency in milliseconds (200: no gaps when the machine is busy).
    fragment-ms: 200
  jack:
    server: ""
    client-name: tapedeck
    # Empty: the physical playback ports (system:playback_1…); else as
    # capture.jack.device.
    device: ""
  pipewire:
    remote: ""
    node-name: tapedeck
    # Empty: the default sink; else a node.name or object.serial.
    device: ""

format:
  # Frames per second, 8000 to 192000.
  sample-rate: 48000
  # Channels, 1 to 32.
  channels: 2
  # s16, s24, s32 (integer) or f32 (float).
  sample-format: s16

encoder:
  # The file format takes are recorded in. Compiled in: wav (RF64 past 4 GiB),
  # flac, aiff, and the lossy opus, mp3 and vorbis (for sharing, usually with
  # `tapedeck export --format mp3`, not for the takes themselves).
  name: wav
  flac:
    # Compression level, as flac -0 ... -8.
    level: 5
    # Decode every frame while recording and compare it with the input (about
    # 20% more CPU). Off, as with flac and sox: every take carries the MD5 of
    # its input, which `flac -t` checks, and a recording that stopped at a frame
    # that failed the check would lose all that followed. Exports are verified
    # whatever this says.
    verify: false
    # Bytes of PADDING kept so tags can be edited without rewriting the file.
    padding: 8192
  opus:
    # Target bit rate in bits per second, all channels together (6000 to
    # 512000).
    bitrate: 128000
    # Encoder complexity: 0 fastest, 10 best.
    complexity: 10
  mp3:
    # Constant bit rate in bits per second, as lame -b (rounded down to an MP3
    # rate: 32k … 128k, 160k, 192k, 224k, 256k, 320k). For exports
    # (`tapedeck export --format mp3`).
    bitrate: 128000
  vorbis:
    # Quality, as oggenc -q: 0 smallest, 10 best (3 is about 112 kbit/s for
    # stereo).
    quality: 3

storage:
  # Where takes live. Compiled in: directory (one catalog.sqlite for the
  # library), bundle (one self-contained NAME.tapedeck folder per session:
  # manifest.json plus audio; copy it anywhere).
  backend: directory
  # How often (seconds) a recording's header is brought up to date and its file
  # synced: the most audio a crash or power loss can cost.
  checkpoint-seconds: 1
  # Warn before a recording, and once while it runs, when the library's disk has
  # room for fewer minutes than this at the recording's format (counted
  # uncompressed). 0: never warn. A recording that fills the disk stops and is
  # kept as `truncated` either way.
  warn-free-minutes: 10
  directory:
    # The library folder. Empty: $XDG_DATA_HOME/tapedeck
    # (~/.local/share/tapedeck).
    path: ""
    # Seconds to wait for another tapedeck process that holds the catalog.
    busy-timeout: 10
  bundle:
    # The folder holding NAME.tapedeck bundles, or one bundle to open in place
    # (a library of one session). Empty: $XDG_DATA_HOME/tapedeck.
    path: ""
    # Seconds to wait for another tapedeck process that is changing a manifest.
    lock-timeout: 10

metadata:
  # Written into every take's file: Broadcast Wave bext and iXML chunks in WAV
  # takes, Vorbis comments in FLAC takes and exports. BWF Originator: who made
  # the recording (32 characters are kept there).
  originator: Tapedeck
  # ORGANIZATION tag of every take. Empty: none.
  organization: ""
  # LOCATION tag of every take. Empty: none.
  location: ""
  # iXML PROJECT. Empty: the session's name.
  project: ""
  # iXML TAPE (the roll or card). Empty: the machine's name.
  tape: ""
  # More iXML USER lines, as NAME=value pairs separated by commas, e.g.
  # "MIXER=Ana, ROOM=B".
  user: ""

sync:
  # Where `tapedeck push` copies finished takes, and `tapedeck fleet` reads
  # every machine's from. Compiled in: s3 (S3-compatible object storage). Empty:
  # none (push and fleet say how to set one).
  backend: ""
  # Delete local takes whose upload is verified once they are older than this
  # (30d, 12h, 90m). Empty: keep every take.
  keep-local: ""
  # The fleet catalog: an index of every machine's takes in PostgreSQL, for
  # listing and searching a large fleet quickly. Empty: none.
  catalog:
    # postgres://USER@HOST[:PORT]/DATABASE (?sslmode=require for TLS;
    # ?sslmode=verify-full&sslrootcert=CA.pem also checks the server), or
    # postgres://USER@/DATABASE?host=/run/postgresql for a local socket.
    postgres: ""
    # The environment variable holding the user's password (never the config
    # itself). Empty: the server asks for none.
    password-env: ""
    # How often a running record, serve or push --watch tells the catalog its
    # state, in seconds; fleet status marks one unheard for two of these stale.
    heartbeat-seconds: 10
  s3:
    # The server, e.g. https://s3.eu-west-1.amazonaws.com or
    # http://nas.local:3900 (https: TLS).
    endpoint: ""
    # The region requests are signed for (self-hosted servers usually accept
    # us-east-1).
    region: us-east-1
    # The bucket takes go to; it must exist.
    bucket: ""
    # A folder inside the bucket (letters, digits, . _ - and /). Empty: the
    # bucket's root.
    prefix: ""
    # true: http://HOST/BUCKET/KEY, as most self-hosted servers need;
    # false: BUCKET.HOST (AWS).
    path-style: false
    # The environment variables holding the key pair. Credentials never go in
    # this file.
    access-key-env: AWS_ACCESS_KEY_ID
    secret-key-env: AWS_SECRET_ACCESS_KEY
    # Else an AWS-format credentials file ([default] aws_access_key_id = …),
    # chmod 600.
    credentials-file: ""
    # The profile to read from credentials-file.
    profile: default
    # MiB per part of a multipart upload (takes larger than one part go up in
    # parts).
    part-size-mib: 8
    # Parts sent at once; memory used is about (concurrency + 1) × part size.
    concurrency: 4

# When to record: windows of the day in a time zone, by the clock or by the sun
# at schedule.location (sunrise, sunset, noon, civil-, nautical- and
# astronomical-dawn and -dusk, with an offset), on some weekdays or every N
# days, with a duty cycle inside them. `tapedeck schedule` lists the next ones;
# `tapedeck record --schedule` records them.
# schedule:
#   timezone: Europe/Amsterdam
#   location: { latitude: 52.37, longitude: 4.90 }
#   windows:
#     - { days: [mon, tue, wed, thu, fri], from: "06:00", to: "09:00" }
#     - { from: sunrise-1h, to: sunrise+2h }
#     - { from: civil-dusk, to: civil-dusk+30m, every: 2d }
#   duty-cycle: { record: 1m, every: 5m }

# Programmes every `record` into the library also keeps as takes of their own,
# cut from the same audio while its takes (an hourly log, say) go on unchanged:
# a take named "NAME YYYY-MM-DD HH.MM", tagged PROGRAM=NAME, from START - pad to
# END + pad on this machine's clock, on the days given (every day without).
# `record --program "News 09:00-09:10 pad 2m mon-fri"` adds one for one run.
# programs:
#   - { name: News, time: "09:00-09:10", pad: 2m, days: mon-fri }
#   - { name: Late Show, time: "23:00-01:00" }

retention:
  # Which takes Tapedeck deletes by itself (`tapedeck retention`, or --dry-run
  # to see what would go). Never a take that records, one with markers, notes or
  # tags (keep-marked), or, with a sync: remote, one not verified there.
  # Delete takes older than this, counted from when each was recorded (30d, 12h,
  # 90m); empty keeps them however old.
  keep: ""
  # When the library's disk has less free than this (10%, or 20G, 500M), delete
  # the oldest takes until it has; empty: no floor.
  free-space-floor: ""
  # Never delete a take with markers, notes or tags.
  keep-marked: true

provenance:
  # Takes you can prove (docs/PROVENANCE.md): `tapedeck verify` checks a take,
  # or a file and its .chain, against this machine's public key
  # (`tapedeck keys export`).
  # Sign every take as it is recorded: a hash chain of its audio beside it
  # (TAKEFILE.chain), signed with this machine's key (`tapedeck keys init`).
  # Recording refuses to start without the key.
  sign: false
  # The signing key's file; empty: $XDG_CONFIG_HOME/tapedeck/signing-key, where
  # `tapedeck keys init` makes it.
  key: ""
  # Sign the chain's head every this many checkpoints (one a second), and at
  # each take's end.
  sign-every: 10
  # An RFC 3161 time-stamping authority's URL (http or https): each signed
  # take's head is stamped at its end and every tsa-every-minutes; tokens go
  # into its chain. Requests wait in a queue while it cannot be reached
  # (`tapedeck keys stamp` sends them). Empty: no time stamps.
  tsa: ""
  # Time-stamp a long take's head every this many minutes as well as at its
  # end; 0: only at its end.
  tsa-every-minutes: 60
  # A file of PEM certificates trusted to vouch for time-stamping authorities
  # (`tapedeck verify` checks tokens against it); empty: the system's CA bundle.
  tsa-ca: ""

# Alerts that reach a person while a recording runs unattended: each rule sends
# the events its when: names through one route (webhook, ntfy or email). Events:
# silence (--silence-alarm; resolved when sound is back), device-lost (resolved:
# device-back), take-interrupted, disk-low (storage.warn-free-minutes),
# overruns, not-recording (no frame for 10 s), or all. A rule sends at most
# limit: messages (6/10m unless given); more come as one summary. Alerts that
# cannot be sent wait in $XDG_STATE_HOME/tapedeck/alerts and go once the route
# works. Secrets never go here: name an environment variable (token-env,
# password-env) or a credentials file (chmod 600; username = …, password = …,
# token = … lines). Try the routes with `tapedeck alerts test`.
# alerts:
#   - when: [silence, device-lost, take-interrupted, disk-low]
#     webhook: { url: "https://hooks.example.org/tapedeck" }  # JSON POST; template: text for chat hooks
#   - when: [disk-low, not-recording]
#     ntfy: { url: "https://ntfy.sh/my-recorder" }
#   - when: [silence, device-lost]
#     limit: 3/1h
#     email: { smtp: "smtp.example.org:587", from: rec@example.org, to: [me@example.org],
#              username: rec@example.org, password-env: TAPEDECK_MAIL_PASSWORD }
"""#
}
