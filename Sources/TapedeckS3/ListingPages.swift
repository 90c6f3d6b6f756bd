import NIOCore
import TapedeckCore

/// One paginated S3 listing (ListObjectsV2, ListParts, ListMultipartUploads) kept from running
/// forever: a page that says it is cut short (`IsTruncated`) must give a continuation token or
/// marker never given before and add an entry not listed before; otherwise the server will not
/// end the listing, and it is stopped with an error naming the server (exit 69). A plain value,
/// one per listing; every member runs on any thread and never blocks.
struct ListingPages {
    /// The server, for messages.
    let endpoint: String
    /// What is listed, for messages: "the parts of KEY".
    let what: String
    private var markers: Set<String> = []
    private(set) var pages = 0

    init(endpoint: String, what: String) {
        self.endpoint = endpoint
        self.what = what
    }

    /// After a page: the marker to ask for the next page with, or `nil` when the listing is
    /// complete.
    /// - Parameters:
    ///   - truncated: whether the page said `IsTruncated` true.
    ///   - marker: the continuation token or marker it gave.
    ///   - added: the entries it listed that earlier pages had not.
    /// - Throws: `.remoteUnavailable` when the page is cut short but gives no marker, gives one
    ///   already followed, or adds nothing.
    mutating func next(truncated: Bool, marker: String?, added: Int) throws -> String? {
        pages += 1
        guard truncated else { return nil }
        guard let marker, !marker.isEmpty else {
            throw stop("said page \(pages) was cut short but gave no marker to go on from")
        }
        guard markers.insert(marker).inserted else {
            throw stop("gave the same continuation marker again on page \(pages)")
        }
        guard added > 0 else {
            throw stop("sent page \(pages) cut short with nothing new on it")
        }
        return marker
    }

    private func stop(_ what: String) -> TapedeckError {
        TapedeckError(.remoteUnavailable, "The S3 server \(endpoint) \(what) while listing \(self.what): its listing would never end, so it was stopped. Check that sync.s3.endpoint names a working S3 server, then run the command again.")
    }
}

/// How fast a download's body arrives, for giving up on a server that drips it: fewer than
/// `minimumBytes` in a whole `window` is too slow. A plain value; any thread; never blocks.
struct DownloadPace {
    let window: TimeAmount
    let minimumBytes: Int
    private var start = NIODeadline.now()
    private var bytes = 0

    init(window: TimeAmount, minimumBytes: Int) {
        self.window = window
        self.minimumBytes = minimumBytes
    }

    /// Counts `count` bytes just received; returns the bytes of the window that ended too slow,
    /// or `nil`. A stall with no byte at all is the idle timeout's to end.
    mutating func received(_ count: Int) -> Int? {
        bytes += count
        let now = NIODeadline.now()
        guard now - start >= window else { return nil }
        defer {
            start = now
            bytes = 0
        }
        return bytes < minimumBytes ? bytes : nil
    }
}
