/*
 * Matching request URIs against the configured [auth] uri_template paths such
 * as "/user/get/{id}", and pulling the raw ID out of a match.  Pure: no I/O,
 * no logging, no globals, no allocation; reentrant and thread-safe.
 */
#ifndef BLOOMGUARD_URITMPL_H
#define BLOOMGUARD_URITMPL_H

#include <stdbool.h>
#include <stddef.h>

/* The placeholder a template must hold exactly once. */
#define URITMPL_PLACEHOLDER "{id}"

/*
 * The rule of an ID in a URI, in one place: a URI's path ends at the first
 * byte of URITMPL_PATH_ENDS (the query, the fragment), and a raw ID holds
 * none of URITMPL_ID_STOPS (its segment's end, and the path's).  Every
 * other byte may be part of an ID.  uritmpl_match applies it, and the proxy
 * configurations (bloomguard --print-nginx, --print-caddy) render their
 * regexps' classes from it.
 */
#define URITMPL_PATH_ENDS "?#"
#define URITMPL_ID_STOPS "/" URITMPL_PATH_ENDS

/*
 * A template is a NUL-terminated path with exactly one "{id}" standing for
 * one whole path segment or a part of one: "/user/get/{id}",
 * "/api/v1/orders/{id}/items", "/files/{id}.json" (a literal prefix and/or
 * suffix within the segment is allowed).
 *
 * uritmpl_valid returns true if tmpl is usable: it starts with '/', holds
 * "{id}" exactly once, no other '{' or '}', no '?' or '#' (the matcher
 * ignores the query and fragment, so such a template could never match) and
 * no whitespace or control bytes (0x00..0x20, 0x7F).  Otherwise it returns
 * false and, if why is not NULL, sets *why to a short reason in static
 * storage, e.g. "must start with '/'".  On success *why is set to NULL.
 * A NULL tmpl is invalid.
 */
bool uritmpl_valid(const char *tmpl, const char **why);

/*
 * Match uri[0..uri_len) (need not be NUL-terminated; the path as it came off
 * the request line, NOT percent-decoded) against tmpl, which must satisfy
 * uritmpl_valid (for other templates the result is unspecified, but never
 * reads out of bounds).
 *
 * Everything from the first '?' or '#' on is ignored.  The literal text
 * before and after "{id}" must match the start and the end of the remaining
 * path byte for byte (case-sensitive, no decoding); what lies between is the
 * ID, which must be non-empty and must not contain '/'.  Hence
 * "/user/get/42/" and "/user/get/" do not match "/user/get/{id}",
 * "/user/get/42?x=1" matches with ID "42", "/files/a.b.json" matches
 * "/files/{id}.json" with ID "a.b".
 *
 * On a match returns true and sets *id_start (pointing into uri) and
 * *id_len to the still percent-encoded ID: "%2F" stays "%2F", the caller
 * decodes it with id_decode.  On no match returns false and leaves both
 * untouched.  uri may be NULL only if uri_len is 0.
 */
bool uritmpl_match(const char *tmpl, const char *uri, size_t uri_len,
                   const char **id_start, size_t *id_len);

#endif /* BLOOMGUARD_URITMPL_H */
