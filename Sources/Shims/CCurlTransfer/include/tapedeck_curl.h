#ifndef TAPEDECK_CURL_H
#define TAPEDECK_CURL_H

#include <stddef.h>

// A few blocking transfers through libcurl (the alert routes: an HTTP POST, a mail over SMTP),
// behind functions that are not variadic, so Swift can call them. This header does not include
// curl's. Each call makes its own easy handle: safe on any thread, blocks until the transfer ends
// or `timeout_seconds` pass.

typedef struct {
    // The HTTP status (or the SMTP server's last reply code); 0 when none came.
    long status;
    // curl's error text when the transfer failed; empty on success.
    char error[256];
    // The first bytes of the answer's body (HTTP), for messages.
    char body[512];
} tapedeck_transfer_result;

// POSTs `body` to `url` (http or https only) with the given header lines ("Name: value").
// `user`/`password` (both or neither) give basic authentication. Returns 0 when the transfer
// completed (whatever the status), -1 when it failed (error set).
int tapedeck_http_post(const char *url, const char *const *headers, size_t header_count,
                       const char *body, size_t body_length, long timeout_seconds,
                       const char *user, const char *password, tapedeck_transfer_result *result);

// POSTs like tapedeck_http_post and keeps the whole answer in `answer` (`capacity` bytes at
// most; `*answer_length` is what came, and the transfer fails when more would come).
int tapedeck_http_post_keeping(const char *url, const char *const *headers, size_t header_count,
                               const char *body, size_t body_length, long timeout_seconds,
                               unsigned char *answer, size_t capacity, size_t *answer_length,
                               tapedeck_transfer_result *result);

// Sends one message (`message`, with its headers, CRLF line ends) over SMTP: `url` is
// smtp://host:port (STARTTLS when `require_tls`) or smtps://host:port (TLS from the start).
// `user`/`password` may be NULL (no AUTH). Returns 0 when the server took the message, -1 otherwise.
int tapedeck_smtp_send(const char *url, int require_tls, const char *user, const char *password,
                       const char *from, const char *const *recipients, size_t recipient_count,
                       const char *message, size_t message_length, long timeout_seconds,
                       tapedeck_transfer_result *result);

#endif
