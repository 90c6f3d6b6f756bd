import Foundation
import Crypto
import Testing
@testable import TapedeckS3

/// The signer against AWS's published vectors: the Signature Version 4 test suite's requests
/// (service "service", 2015-08-30) and the four examples of the Amazon S3 API Reference's
/// "Signature Calculations for the Authorization Header" (2013-05-24).
@Suite("AWS Signature Version 4")
struct SigV4Tests {
    static let suite = SigV4Signer(credentials: S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                                   region: "us-east-1", service: "service")
    static let suiteDate = Date(timeIntervalSince1970: 1_440_938_160)  // 2015-08-30T12:36:00Z
    static let s3 = SigV4Signer(credentials: S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
                                region: "us-east-1")
    static let s3Date = Date(timeIntervalSince1970: 1_369_353_600)  // 2013-05-24T00:00:00Z
    static let bucketHost = ("Host", "examplebucket.s3.amazonaws.com")

    static func signature(_ headers: [(String, String)]) -> String {
        let auth = headers.first { $0.0 == "Authorization" }?.1 ?? ""
        return String(auth.split(separator: "Signature=").last ?? "")
    }

    @Test("the test suite's get-vanilla, post-vanilla and get-vanilla-query-order-key-case")
    func testSuite() {
        #expect(SigV4Signer.amzDate(Self.suiteDate) == "20150830T123600Z")
        let host = ("Host", "example.amazonaws.com")
        let get = Self.suite.sign(.init(method: "GET", path: "/", headers: [host]), payloadHash: SigV4Signer.emptyPayloadHash, date: Self.suiteDate)
        #expect(get.last?.1 == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        let post = Self.suite.sign(.init(method: "POST", path: "/", headers: [host]), payloadHash: SigV4Signer.emptyPayloadHash, date: Self.suiteDate)
        #expect(Self.signature(post) == "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b")
        let ordered = Self.suite.sign(.init(method: "GET", path: "/", query: [("Param2", "value2"), ("Param1", "value1")], headers: [host]),
                                      payloadHash: SigV4Signer.emptyPayloadHash, date: Self.suiteDate)
        #expect(Self.signature(ordered) == "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")
    }

    @Test("S3's GET Object, PUT Object, GET Bucket Lifecycle and GET Bucket (list) examples")
    func s3Examples() {
        let empty = SigV4Signer.emptyPayloadHash
        let common = [Self.bucketHost, ("x-amz-content-sha256", empty)]
        let get = Self.s3.sign(.init(method: "GET", path: "/test.txt", headers: common + [("Range", "bytes=0-9")]), payloadHash: empty, date: Self.s3Date)
        #expect(Self.signature(get) == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")

        let body = Data("Welcome to Amazon S3.".utf8)
        let hash = SigV4Signer.hex(SHA256.hash(data: body))
        #expect(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let put = Self.s3.sign(.init(method: "PUT", path: "/" + SigV4Signer.encode("test$file.text", keepingSlash: true),
                                     headers: [Self.bucketHost, ("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                                               ("x-amz-content-sha256", hash)]),
                               payloadHash: hash, date: Self.s3Date)
        #expect(put.last?.1.contains("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,") == true)
        #expect(Self.signature(put) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")

        let lifecycle = Self.s3.sign(.init(method: "GET", path: "/", query: [("lifecycle", "")], headers: common), payloadHash: empty, date: Self.s3Date)
        #expect(Self.signature(lifecycle) == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
        let list = Self.s3.sign(.init(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: common), payloadHash: empty, date: Self.s3Date)
        #expect(Self.signature(list) == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    @Test("paths and query values are encoded once, as S3 wants; a session token is signed; the secret is never in the description")
    func encoding() {
        #expect(SigV4Signer.encode("a b/ü+=&~", keepingSlash: true) == "a%20b/%C3%BC%2B%3D%26~")
        #expect(SigV4Signer.encode("a/b", keepingSlash: false) == "a%2Fb")
        let temporary = SigV4Signer(credentials: S3Credentials(accessKeyID: "K", secretAccessKey: "S", sessionToken: "T"), region: "r")
        let headers = temporary.sign(.init(method: "GET", path: "/", headers: [("host", "h")]), payloadHash: SigV4Signer.emptyPayloadHash, date: Self.s3Date)
        #expect(headers.contains { $0.0 == "x-amz-security-token" && $0.1 == "T" })
        #expect(headers.last?.1.contains("x-amz-security-token") == true)
        #expect("\(temporary.credentials)" == "access key K")
    }
}
