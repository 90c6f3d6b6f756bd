/// Tapedeck's version, for reports and the ENCODER tag of exported files.
public enum TapedeckVersion {
    public static let string = "0.2.0"
}
