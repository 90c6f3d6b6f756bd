import CQRencode
import Foundation

/// A QR code drawn on the terminal (libqrencode), two modules a character with half blocks,
/// dark on light whatever the terminal's colours (ANSI black on white), with the quiet zone of
/// four modules the standard asks for: a phone's camera reads it off the screen.
enum TerminalQRCode {
    /// The lines to print for `text`; `nil` where the terminal has no colours (`TERM=dumb`) or
    /// the code would be wider than `columns`.
    static func lines(_ text: String, columns: Int, colours: Bool) -> [String]? {
        guard colours, let matrix = modules(text) else { return nil }
        let quiet = 4
        let size = matrix.count + 2 * quiet
        guard size <= columns else { return nil }
        func dark(_ x: Int, _ y: Int) -> Bool {
            let (mx, my) = (x - quiet, y - quiet)
            return mx >= 0 && my >= 0 && mx < matrix.count && my < matrix.count && matrix[my][mx]
        }
        var lines: [String] = []
        for y in stride(from: 0, to: size, by: 2) {
            var line = "\u{1B}[30;47m"
            for x in 0..<size {
                let cell: String = switch (dark(x, y), dark(x, y + 1)) {
                case (true, true): "█"
                case (true, false): "▀"
                case (false, true): "▄"
                case (false, false): " "
                }
                line += cell
            }
            lines.append(line + "\u{1B}[0m")
        }
        return lines
    }

    /// The code's modules, row by row (`true`: dark), at error correction level M.
    static func modules(_ text: String) -> [[Bool]]? {
        guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        return (0..<width).map { y in (0..<width).map { x in code.pointee.data[y * width + x] & 1 == 1 } }
    }
}
