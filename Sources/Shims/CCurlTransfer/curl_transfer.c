#include "tapedeck_curl.h"

#include <curl/curl.h>
#include <pthread.h>
#include <string.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct {
    char *buffer;
    size_t capacity;
    size_t length;
} sink;

static size_t keep_head(char *data, size_t size, size_t count, void *user) {
    sink *s = user;
    size_t n = size * count;
    if (s->length + 1 < s->capacity) {
        size_t room = s->capacity - 1 - s->length;
        size_t take = n < room ? n : room;
        memcpy(s->buffer + s->length, data, take);
        s->length += take;
        s->buffer[s->length] = 0;
    }
    return n;
}

typedef struct {
    const char *data;
    size_t length;
    size_t offset;
} source;

static size_t give(char *buffer, size_t size, size_t count, void *user) {
    source *s = user;
    size_t room = size * count;
    size_t left = s->length - s->offset;
    size_t n = left < room ? left : room;
    memcpy(buffer, s->data + s->offset, n);
    s->offset += n;
    return n;
}

static CURL *start(tapedeck_transfer_result *result, const char *url, long timeout_seconds, const char *protocols) {
    pthread_once(&global_once, global_init);
    memset(result, 0, sizeof(*result));
    CURL *curl = curl_easy_init();
    if (!curl) {
        strncpy(result->error, "libcurl could not start a transfer", sizeof(result->error) - 1);
        return NULL;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, timeout_seconds < 10 ? timeout_seconds : 10L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, result->error);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, protocols);
#endif
    return curl;
}

static int finish(CURL *curl, CURLcode code, tapedeck_transfer_result *result, CURLINFO status_info) {
    curl_easy_getinfo(curl, status_info, &result->status);
    if (code != CURLE_OK && result->error[0] == 0) {
        strncpy(result->error, curl_easy_strerror(code), sizeof(result->error) - 1);
    }
    curl_easy_cleanup(curl);
    return code == CURLE_OK ? 0 : -1;
}

// Makes `curl` a POST of `body` with the header lines; returns the list to free after the transfer.
static struct curl_slist *post_body(CURL *curl, const char *const *headers, size_t header_count,
                                    const char *body, size_t body_length) {
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < header_count; i++) list = curl_slist_append(list, headers[i]);
    // No "Expect: 100-continue" wait before the body.
    list = curl_slist_append(list, "Expect:");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
    return list;
}

int tapedeck_http_post(const char *url, const char *const *headers, size_t header_count,
                       const char *body, size_t body_length, long timeout_seconds,
                       const char *user, const char *password, tapedeck_transfer_result *result) {
    CURL *curl = start(result, url, timeout_seconds, "http,https");
    if (!curl) return -1;
    struct curl_slist *list = post_body(curl, headers, header_count, body, body_length);
    if (user && password) {
        curl_easy_setopt(curl, CURLOPT_USERNAME, user);
        curl_easy_setopt(curl, CURLOPT_PASSWORD, password);
    }
    sink s = { result->body, sizeof(result->body), 0 };
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_head);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
    CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(list);
    return finish(curl, code, result, CURLINFO_RESPONSE_CODE);
}

typedef struct {
    unsigned char *buffer;
    size_t capacity;
    size_t length;
} whole_sink;

static size_t keep_all(char *data, size_t size, size_t count, void *user) {
    whole_sink *s = user;
    size_t n = size * count;
    if (n > s->capacity - s->length) return 0;  // more than asked for: the transfer fails
    memcpy(s->buffer + s->length, data, n);
    s->length += n;
    return n;
}

int tapedeck_http_post_keeping(const char *url, const char *const *headers, size_t header_count,
                               const char *body, size_t body_length, long timeout_seconds,
                               unsigned char *answer, size_t capacity, size_t *answer_length,
                               tapedeck_transfer_result *result) {
    *answer_length = 0;
    CURL *curl = start(result, url, timeout_seconds, "http,https");
    if (!curl) return -1;
    struct curl_slist *list = post_body(curl, headers, header_count, body, body_length);
    whole_sink s = { answer, capacity, 0 };
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_all);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
    CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(list);
    *answer_length = s.length;
    return finish(curl, code, result, CURLINFO_RESPONSE_CODE);
}

int tapedeck_smtp_send(const char *url, int require_tls, const char *user, const char *password,
                       const char *from, const char *const *recipients, size_t recipient_count,
                       const char *message, size_t message_length, long timeout_seconds,
                       tapedeck_transfer_result *result) {
    CURL *curl = start(result, url, timeout_seconds, "smtp,smtps");
    if (!curl) return -1;
    if (require_tls) curl_easy_setopt(curl, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
    if (user && password) {
        curl_easy_setopt(curl, CURLOPT_USERNAME, user);
        curl_easy_setopt(curl, CURLOPT_PASSWORD, password);
    }
    curl_easy_setopt(curl, CURLOPT_MAIL_FROM, from);
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < recipient_count; i++) list = curl_slist_append(list, recipients[i]);
    curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, list);
    source s = { message, message_length, 0 };
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, give);
    curl_easy_setopt(curl, CURLOPT_READDATA, &s);
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(list);
    return finish(curl, code, result, CURLINFO_RESPONSE_CODE);
}
