/*
 * PostgreSQL's logical replication stream as bloomguard's WAL follower reads
 * it: the walsender's CopyData framing ('w' XLogData, 'k' keepalive), the
 * pgoutput messages of protocol version 1 inside it, a cache of the
 * Relation messages, and the few things a client writes back (the standby
 * status update, LSNs as text).  No I/O, so it can be unit-tested and fuzzed
 * without a server; the follower owns the connection.
 *
 * Decoding is zero-copy: every pointer a decoder returns points into the
 * caller's buffer and is valid exactly as long as that buffer (for libpq:
 * until the PQfreemem of what PQgetCopyData returned).  Decoders never read
 * outside [buf, buf + len), never allocate, and reject anything that is not
 * one whole, well-formed message with an error code.  They are pure and
 * reentrant.  The relation cache allocates (bounded, see pgoutput_rels_new)
 * and is not thread-safe: one thread, or the caller's lock.
 *
 * References: PostgreSQL 15's src/backend/replication/logical/proto.c (the
 * message writers), pgoutput/pgoutput.c, walsender.c (framing, status
 * updates) and the "Logical Replication Message Formats" documentation.
 */
#ifndef BLOOMGUARD_PGOUTPUT_H
#define BLOOMGUARD_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pgoutput_error {
    PGOUTPUT_OK = 0,
    PGOUTPUT_TRUNCATED,     /* the bytes end before a field, or a length points past them */
    PGOUTPUT_TRAILING,      /* bytes left after a complete message */
    PGOUTPUT_UNKNOWN_TYPE,  /* first byte is no frame or message type we know */
    PGOUTPUT_UNSUPPORTED,   /* a message of a feature never asked for (streaming, two-phase) */
    PGOUTPUT_NO_NUL,        /* a string without its terminating 0 byte */
    PGOUTPUT_BAD_LENGTH,    /* a negative length (column value, message content) */
    PGOUTPUT_BAD_COUNT,     /* a count (columns, relids) the remaining bytes cannot hold */
    PGOUTPUT_BAD_KIND,      /* a column kind other than n/u/t/b, or a tuple marker out of place */
    PGOUTPUT_BAD_FLAGS,     /* Commit flags other than 0 (PostgreSQL's own subscriber refuses them too) */
    PGOUTPUT_WRONG_TYPE,    /* pgoutput_rels_put was given a message that is no Relation */
    PGOUTPUT_CACHE_FULL,    /* the relation cache would exceed its bounds */
    PGOUTPUT_NO_MEMORY
};

/* Short text for e, e.g. "message truncated" (static, never NULL). */
const char *pgoutput_strerror(enum pgoutput_error e);

/* ------------------------------------------------------------- framing -- */

/*
 * One CopyData payload of START_REPLICATION, as PQgetCopyData returns it.
 * PGOUTPUT_XLOGDATA carries one pgoutput message (data, len: hand them to
 * pgoutput_decode); PGOUTPUT_KEEPALIVE asks, when reply_requested, for a
 * standby status update at once (else the walsender drops the connection
 * after wal_sender_timeout).
 */
enum pgoutput_frame_type {
    PGOUTPUT_XLOGDATA = 'w',
    PGOUTPUT_KEEPALIVE = 'k'
};

struct pgoutput_frame {
    enum pgoutput_frame_type type;
    /*
     * 'w': the LSN of the change the message belongs to; 0 for Relation and
     * Type messages (PostgreSQL 15 sends them so), and 0 for 'k'.  Not a
     * position to resume from: that is a Commit's end_lsn.
     */
    uint64_t wal_start;
    uint64_t wal_end;           /* 'w': same as wal_start; 'k': the server's end of WAL */
    int64_t send_time;          /* server clock, microseconds since 2000-01-01 UTC */
    uint8_t reply_requested;    /* 'k': 1 = answer now (0 for 'w') */
    const char *data;           /* 'w': the pgoutput message (NULL for 'k') */
    size_t len;                 /* its length in bytes, possibly 0 */
};

/*
 * Decode buf[0..len): 'w' (u64 dataStart, u64 walEnd, i64 sendTime, then
 * the message) or 'k' (u64 walEnd, i64 sendTime, u8 replyRequested, nothing
 * after).  On PGOUTPUT_OK *out is filled; on an error its contents are
 * unspecified.  buf may be NULL when len is 0.
 */
enum pgoutput_error pgoutput_frame_decode(const void *buf, size_t len, struct pgoutput_frame *out);

/* ------------------------------------------------------------ messages -- */

enum pgoutput_msg_type {
    PGOUTPUT_BEGIN = 'B',
    PGOUTPUT_COMMIT = 'C',
    PGOUTPUT_ORIGIN = 'O',
    PGOUTPUT_RELATION = 'R',
    PGOUTPUT_TYPE = 'Y',
    PGOUTPUT_INSERT = 'I',
    PGOUTPUT_UPDATE = 'U',
    PGOUTPUT_DELETE = 'D',
    PGOUTPUT_TRUNCATE = 'T',
    PGOUTPUT_MESSAGE = 'M'
};

/* Relation column flags: part of the replica identity (the key of 'K' tuples). */
#define PGOUTPUT_ATTR_KEY 0x01
/* Truncate options. */
#define PGOUTPUT_TRUNCATE_CASCADE 0x01
#define PGOUTPUT_TRUNCATE_RESTART_IDENTITY 0x02
/* Message flags. */
#define PGOUTPUT_MESSAGE_TRANSACTIONAL 0x01

/*
 * A validated TupleData: ncols columns in data[0..len) (after the column
 * count).  Read it with pgoutput_tuple_get or the iterator below.
 */
struct pgoutput_tuple {
    uint16_t ncols;
    const char *data;
    size_t len;
};

/*
 * One column of a tuple.  kind 'n' null, 'u' an unchanged TOASTed value
 * (the server did not send it: an UPDATE that kept it), 't' text in the
 * type's output format, 'b' binary (never with proto_version '1' unless
 * binary 'true' was asked for).  For 't' and 'b', value[0..len) are the
 * bytes; the length is authoritative (they are not NUL-terminated and may
 * hold any byte).  For 'n' and 'u', value is NULL and len 0.
 */
struct pgoutput_col {
    char kind;
    const char *value;
    size_t len;
};

/*
 * The columns of a Relation message: natts entries in data[0..len) (after
 * the count).  Read them with the iterator below.
 */
struct pgoutput_attrs {
    uint16_t natts;
    const char *data;
    size_t len;
};

/* One column of a Relation message.  name is NUL-terminated (name[name_len] == 0). */
struct pgoutput_attr {
    uint8_t flags;              /* PGOUTPUT_ATTR_KEY */
    const char *name;
    size_t name_len;
    uint32_t typid;             /* the type's OID (names of non-built-in types come in 'Y') */
    int32_t typmod;             /* -1 when the type has none */
};

/*
 * One decoded pgoutput message, by type.  Strings (names, prefixes) are
 * NUL-terminated in the caller's buffer, so they are C strings too; *_len is
 * their length without the terminator.  An empty namespace means pg_catalog
 * (the server saves the bytes); the decoder passes it through as "".
 */
struct pgoutput_msg {
    enum pgoutput_msg_type type;
    union {
        struct {
            uint64_t final_lsn;         /* the commit's LSN */
            int64_t commit_time;        /* microseconds since 2000-01-01 UTC */
            uint32_t xid;
        } begin;
        struct {
            uint8_t flags;              /* always 0 (others are refused) */
            uint64_t commit_lsn;
            uint64_t end_lsn;           /* confirm this one to the server once applied */
            int64_t commit_time;
        } commit;
        struct {
            uint64_t lsn;               /* the commit's LSN on the origin server */
            const char *name;
            size_t name_len;
        } origin;
        struct {
            uint32_t relid;
            const char *nspname;
            size_t nspname_len;
            const char *relname;
            size_t relname_len;
            char replident;             /* 'd' default, 'n' nothing, 'f' full, 'i' index */
            struct pgoutput_attrs attrs;
        } relation;
        struct {
            uint32_t typid;
            const char *nspname;
            size_t nspname_len;
            const char *typname;
            size_t typname_len;
        } pgtype;               /* the Type message */
        struct {
            uint32_t relid;
            struct pgoutput_tuple tuple;        /* the new row */
        } insert;
        struct {
            uint32_t relid;
            /*
             * 0: no old tuple (the replica identity did not change); 'K':
             * old holds the old key (key columns only; the others are 'n');
             * 'O': old holds the whole old row (REPLICA IDENTITY FULL).
             */
            char old_kind;
            struct pgoutput_tuple old;  /* ncols 0, data NULL when old_kind is 0 */
            struct pgoutput_tuple tuple;        /* the new row */
        } update;
        struct {
            uint32_t relid;
            char old_kind;              /* 'K' or 'O', as for update */
            struct pgoutput_tuple old;
        } delete;
        struct {
            uint32_t nrelids;           /* read them with pgoutput_truncate_relid */
            uint8_t options;            /* PGOUTPUT_TRUNCATE_* */
            const char *relids;         /* nrelids big-endian u32 */
        } truncate;
        struct {
            uint8_t flags;              /* PGOUTPUT_MESSAGE_TRANSACTIONAL */
            uint64_t lsn;
            const char *prefix;
            size_t prefix_len;
            const char *content;        /* content[0..content_len), any bytes, not terminated */
            size_t content_len;
        } message;
    };
};

/*
 * Decode one pgoutput message of protocol version 1 (the data of an
 * XLogData frame): Begin, Commit, Origin, Relation, Type, Insert, Update,
 * Delete, Truncate, Message.  Every string must end with its 0 byte inside
 * buf, every count and length must fit the bytes that follow, every tuple
 * column must be well-formed, and the message must end exactly at buf +
 * len.  Stream and two-phase messages (PostgreSQL sends them only when
 * asked) are PGOUTPUT_UNSUPPORTED.  On PGOUTPUT_OK *out is filled, its
 * pointers into buf; on an error its contents are unspecified.
 */
enum pgoutput_error pgoutput_decode(const void *buf, size_t len, struct pgoutput_msg *out);

/*
 * An iterator over a tuple's columns or a relation's attributes:
 * initialise it with pgoutput_tuple_iter or pgoutput_attrs_iter, then call
 * the matching _next until it returns false.
 */
struct pgoutput_iter {
    const char *p;
    const char *end;
    uint32_t left;
};

void pgoutput_tuple_iter(const struct pgoutput_tuple *t, struct pgoutput_iter *it);
/*
 * The next column into *col: true, or false at the end.  On a tuple
 * pgoutput_decode returned this never fails before ncols columns; on bytes
 * that do not parse (a hand-made struct) it stops early with false.
 */
bool pgoutput_tuple_next(struct pgoutput_iter *it, struct pgoutput_col *col);

/* Column idx (0-based) into *col: false when idx >= ncols (or the bytes do not parse). */
bool pgoutput_tuple_get(const struct pgoutput_tuple *t, unsigned idx, struct pgoutput_col *col);

void pgoutput_attrs_iter(const struct pgoutput_attrs *a, struct pgoutput_iter *it);
bool pgoutput_attrs_next(struct pgoutput_iter *it, struct pgoutput_attr *attr);

/* Relid i (0-based, i < nrelids) of a decoded Truncate message. */
uint32_t pgoutput_truncate_relid(const struct pgoutput_msg *m, uint32_t i);

/* ------------------------------------------------------ relation cache -- */

/*
 * What Insert, Update and Delete need to be understood: the server sends a
 * Relation message before the first change of a relation in a session, and
 * again whenever its definition changed (ALTER TABLE, a new column list).
 * The cache keeps the last one per relid.
 */
struct pgoutput_relcol {
    char *name;
    uint32_t typid;
    int32_t typmod;
    uint8_t flags;              /* PGOUTPUT_ATTR_KEY */
};

struct pgoutput_rel {
    uint32_t relid;
    char *nspname;              /* "pg_catalog" where the message had "" */
    char *relname;
    char replident;
    uint16_t ncols;             /* the columns the publication sends, in tuple order */
    struct pgoutput_relcol *cols;
    /*
     * 1 for the first Relation message of this relid, one more with each
     * replacement: a caller caching a column index compares it.
     */
    uint64_t version;
};

struct pgoutput_rels;

/*
 * An empty cache that holds at most max_rels relations and max_bytes bytes
 * of them (each relation counts its struct, its column array and its
 * strings; the hash table adds 128 bytes, or less than 32 per relation
 * held, on top).  A
 * put that would exceed either bound fails with PGOUTPUT_CACHE_FULL and
 * changes nothing: the server only sends a relation once, so forgetting one
 * silently would make its rows unreadable later.  Both must be > 0.  NULL
 * when out of memory or a bound is 0.
 */
struct pgoutput_rels *pgoutput_rels_new(size_t max_rels, size_t max_bytes);

/* Free the cache and everything it holds; NULL is a no-op. */
void pgoutput_rels_free(struct pgoutput_rels *rels);

/*
 * Copy the Relation message m (from pgoutput_decode) into the cache,
 * replacing what it held for that relid.  m's buffer may be freed
 * afterwards.  PGOUTPUT_WRONG_TYPE if m is not a Relation,
 * PGOUTPUT_CACHE_FULL, PGOUTPUT_NO_MEMORY: the cache is then unchanged.
 * Invalidates every pointer pgoutput_rels_get returned.
 */
enum pgoutput_error pgoutput_rels_put(struct pgoutput_rels *rels, const struct pgoutput_msg *m);

/*
 * The relation relid, or NULL if no Relation message for it was put.  The
 * pointer (and its names and columns) is valid until the next
 * pgoutput_rels_put or pgoutput_rels_free on this cache.
 */
const struct pgoutput_rel *pgoutput_rels_get(const struct pgoutput_rels *rels, uint32_t relid);

#define PGOUTPUT_NO_REL (-1)
#define PGOUTPUT_NO_COLUMN (-2)
/*
 * The index of the column called name (exact, case-sensitive bytes, as in
 * pg_attribute) in relid's tuples: >= 0; PGOUTPUT_NO_REL when relid is
 * unknown; PGOUTPUT_NO_COLUMN when the relation has no such column or the
 * publication's column list leaves it out.
 */
int pgoutput_rels_column(const struct pgoutput_rels *rels, uint32_t relid, const char *name);

/*
 * A column followed by its name across a relation's Relation messages (the
 * server sends one again after every ALTER TABLE, before the next change):
 * where its values are in the relation's tuples, and what the message it
 * was found in said of it.  Zero it to start; the caller keeps one per
 * relation and name.
 */
struct pgoutput_track {
    uint64_t version;           /* of the relation it was resolved in; 0: never */
    int col;                    /* index in the tuples; < 0: the relation has no such column */
    uint32_t typid;             /* the column's type and typmod then */
    int32_t typmod;
};

enum pgoutput_track_result {
    PGOUTPUT_TRACK_SAME,        /* read tuples at tr->col: the version the last call saw,
                                   or a new one with the column where and as it was */
    PGOUTPUT_TRACK_FOUND,       /* first resolved, or back after MISSING: read at tr->col */
    PGOUTPUT_TRACK_MISSING,     /* the relation has no such column now (renamed, dropped, left
                                   out of the column list): its rows carry no ID here */
    PGOUTPUT_TRACK_MOVED,       /* the name is at another index: it may be another column
                                   (renames swapped, a column before it dropped) */
    PGOUTPUT_TRACK_RETYPED,     /* the same index, another type or typmod: IDs may be spelled
                                   otherwise than those read before */
    PGOUTPUT_TRACK_NO_REL       /* no Relation message for relid: tr unchanged */
};

/*
 * Resolve name (pgoutput_rels_column's rules) in relid's current relation
 * and update tr.  Only a new version of the relation can change anything;
 * the result says how the column's place or type changed since tr's
 * version.  MISSING, MOVED and RETYPED are what a follower must treat as a
 * gap (the rows it reads from here may not be the rows, or the spelling,
 * the filter holds); a new version that only renames other columns, adds
 * or drops columns after it, is SAME.  Pure, no allocation.
 */
enum pgoutput_track_result pgoutput_rels_track(const struct pgoutput_rels *rels, uint32_t relid,
                                               const char *name, struct pgoutput_track *tr);

/* How many relations, and how many bytes of them (as bounded), the cache holds. */
size_t pgoutput_rels_count(const struct pgoutput_rels *rels);
size_t pgoutput_rels_bytes(const struct pgoutput_rels *rels);

/* ------------------------------------------------------------ encoders -- */

/* The standby status update is 34 bytes. */
#define PGOUTPUT_STATUS_SIZE 34

/*
 * Write a standby status update ('r', u64 write, u64 flush, u64 apply, i64
 * sendTime, u8 replyRequested) into buf for PQputCopyData.  write: WAL
 * received; flush: WAL durably processed, which lets the server recycle it
 * and is where a restart resumes; apply: WAL applied (a logical client
 * usually says flush).  send_time in microseconds since 2000-01-01 UTC
 * (pgoutput_time_from_unix_us).  Returns PGOUTPUT_STATUS_SIZE, or 0 (and
 * writes nothing) when cap is smaller.
 */
size_t pgoutput_status_encode(void *buf, size_t cap, uint64_t write_lsn, uint64_t flush_lsn,
                              uint64_t apply_lsn, int64_t send_time, bool reply_requested);

/* 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in microseconds since the Unix epoch. */
#define PGOUTPUT_EPOCH_UNIX_US INT64_C(946684800000000)

/*
 * Between microseconds since the Unix epoch and since PostgreSQL's; both
 * saturate at INT64_MIN and INT64_MAX rather than overflow.
 */
int64_t pgoutput_time_from_unix_us(int64_t unix_us);
int64_t pgoutput_time_to_unix_us(int64_t pg_us);

/* "FFFFFFFF/FFFFFFFF" and its terminator. */
#define PGOUTPUT_LSN_BUFSIZE 18

/*
 * Parse an LSN as pg_lsn's input does: 1 to 8 hex digits (either case), '/',
 * 1 to 8 hex digits, and nothing else (no blanks, signs or "0x");
 * s[0..len) need not be NUL-terminated.  False, *lsn untouched, otherwise.
 */
bool pgoutput_lsn_parse(const char *s, size_t len, uint64_t *lsn);

/*
 * Format lsn as pg_lsn prints it ("%X/%X": upper case, no leading zeros,
 * "0/0" for 0) into buf (PGOUTPUT_LSN_BUFSIZE bytes); returns the length.
 */
size_t pgoutput_lsn_format(uint64_t lsn, char *buf);

#endif /* BLOOMGUARD_PGOUTPUT_H */
