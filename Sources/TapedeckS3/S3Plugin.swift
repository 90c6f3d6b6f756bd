public import TapedeckCore
import Foundation

/// The S3 remote plugin descriptor.
public enum S3Plugin {
    /// `sync.backend: s3`. - Thread: `make` runs on any thread; it reads the credentials
    /// (environment or file) and opens no connection.
    public static let remote = RemotePlugin(
        name: "s3",
        summary: "S3-compatible object storage (AWS S3, Ceph RGW, Garage, SeaweedFS, MinIO, Backblaze B2, Cloudflare R2): verified, resumable uploads signed with AWS Signature Version 4.",
        settings: S3Settings.self,
        make: { settings, context in
            try S3Remote(settings: settings, credentials: try S3CredentialSource.load(settings, context: context,
                                                                                     environment: ProcessInfo.processInfo.environment),
                         context: context)
        })
}
