
/// The permissions Tapedeck creates files and folders with, before the umask takes its share:
/// readable by everyone, writable by the owner and the group, never by others. So the user's umask
/// is respected (022 gives 0644 and 0755, 077 gives 0600 and 0700), and even a umask of 000 makes
/// nothing world-writable. SQLite creates the catalog with its own 0644 less the umask.
public enum FileModes {
    /// Regular files: audio, lock files, manifests, exports. 0664 before the umask.
    public static let file: UInt32 = 0o664
    /// Folders: the library, sessions, bundles. 0775 before the umask.
    public static let directory: UInt32 = 0o775
}
