public import TapedeckCore
import Foundation

/// The S3 remote's settings (`sync.s3.*`). Credentials are never a setting: they come from
/// environment variables or a private credentials file. A plain value; safe on any thread.
public struct S3Settings: SettingsGroup, Hashable {
    public static let endpoint = Setting<String>("endpoint",
        help: "The server's address, e.g. https://s3.eu-west-1.amazonaws.com or http://nas.local:3900 (https means TLS).")
    public static let region = Setting<String>("region", default: "us-east-1",
        help: "The region requests are signed for (self-hosted servers usually accept us-east-1; Garage wants its own, often garage).")
    public static let bucket = Setting<String>("bucket", help: "The bucket takes go to; it must exist.")
    public static let prefix = Setting<String>("prefix",
        help: "A folder inside the bucket for Tapedeck's objects, e.g. recordings (letters, digits, . _ - and /); empty for the bucket's root.")
    public static let pathStyle = Setting<Bool>("path-style", default: false,
        help: "Address the bucket in the path (http://HOST/BUCKET/KEY), as most self-hosted servers need; false puts it in the host name (BUCKET.HOST), as AWS prefers.")
    public static let accessKeyEnv = Setting<String>("access-key-env", default: "AWS_ACCESS_KEY_ID",
        help: "The environment variable holding the access key id (the secret is in secret-key-env).")
    public static let secretKeyEnv = Setting<String>("secret-key-env", default: "AWS_SECRET_ACCESS_KEY",
        help: "The environment variable holding the secret access key.")
    public static let credentialsFile = Setting<String>.path("credentials-file",
        help: "A credentials file in the AWS format ([profile] aws_access_key_id = …), readable by its owner only (chmod 600); used when the environment variables are not set.")
    public static let profile = Setting<String>("profile", default: "default", help: "The profile to read from credentials-file.")
    public static let partSize = Setting<Int>("part-size-mib", range: 5...1024, default: 8,
        help: "MiB per part of a multipart upload (takes larger than one part go up in parts).")
    public static let concurrency = Setting<Int>("concurrency", range: 1...16, default: 4,
        help: "Parts sent at once; memory used is about concurrency × part size.")
    public static let declarations = [endpoint.declaration, region.declaration, bucket.declaration, prefix.declaration,
                                      pathStyle.declaration, accessKeyEnv.declaration, secretKeyEnv.declaration,
                                      credentialsFile.declaration, profile.declaration, partSize.declaration, concurrency.declaration]

    public var endpoint: String
    public var region: String
    public var bucket: String
    public var prefix: String
    public var pathStyle: Bool
    public var accessKeyEnv: String
    public var secretKeyEnv: String
    public var credentialsFile: String
    public var profile: String
    public var partSizeMiB: Int
    public var concurrency: Int

    public init(_ settings: PluginSettings) {
        endpoint = settings[Self.endpoint]
        region = settings[Self.region]
        bucket = settings[Self.bucket]
        prefix = settings[Self.prefix]
        pathStyle = settings[Self.pathStyle]
        accessKeyEnv = settings[Self.accessKeyEnv]
        secretKeyEnv = settings[Self.secretKeyEnv]
        credentialsFile = settings[Self.credentialsFile]
        profile = settings[Self.profile]
        partSizeMiB = settings[Self.partSize]
        concurrency = settings[Self.concurrency]
    }
}
