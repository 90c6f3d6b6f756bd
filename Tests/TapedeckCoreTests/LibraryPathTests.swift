import Foundation
import TapedeckCore
import Testing

@Suite("Library paths")
struct LibraryPathTests {
    @Test("a plain name is one component: not empty, not . or .., no slash, no NUL")
    func plainNames() {
        for name in ["a", "take.wav", "...", ".hidden", "..x", "x..", "Take 1 ♪", "ä"] {
            #expect(LibraryPath.isPlainName(name), "\(name)")
        }
        for name in ["", ".", "..", "a/b", "/", "a/", "/a", "a\u{0}b", "\u{0}"] {
            #expect(!LibraryPath.isPlainName(name), "\(name.debugDescription)")
        }
        #expect(LibraryPath.isPlainName("ab/cd".split(separator: "/")[1]))
    }
}
