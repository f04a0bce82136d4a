/*
 * The byte layout of a snapshot (the table in snapshot.h) as the writer
 * (snapshot.c) and the reader (snapshot_read.c) both need it: field offsets,
 * section sizes and the little-endian accessors.  Private to those two files.
 */
#ifndef BLOOMGUARD_SNAPSHOT_FORMAT_H
#define BLOOMGUARD_SNAPSHOT_FORMAT_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "snapshot.h"

/* Bytes of a journal entry besides its id: ttl_left and id_len. */
#define ENTRY_HEAD 12u
/* The header checksum and the trailer. */
#define SUM_LEN 8u
/* Chunk size for copying the bulk between the filter and a file. */
#define CHUNK ((size_t)1 << 20)

/* Offsets of the fixed header fields (the table in snapshot.h): both versions, */
enum {
    OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HEADER_LEN = 12, OFF_TOTAL_LEN = 16,
    OFF_HORIZON = 24, OFF_CREATED = 32, OFF_FPP = 48, OFF_FILTER_LEN = 80,
    OFF_JOURNAL_COUNT = 88, OFF_JOURNAL_LEN = 96,
    OFF_NAME_LEN = 104, OFF_TABLE_LEN = 106, OFF_COLUMN_LEN = 108, OFF_POSITION_LEN = 110
};
/* version 2 only, */
enum {
    OFF_EXPANSION = 40, OFF_TIGHTENING = 56, OFF_MAX_LAYERS = 64, OFF_LAYERS = 68,
    OFF_KV_COUNT = 70, OFF_KV_LEN = 72, OFF_KIND = 76
};
/* version 1 only, */
enum { OFF_CAPACITY = 40, OFF_BLOCKS = 56, OFF_PROBES = 64, OFF_RESERVED1 = 68, OFF_ITEMS = 72 };
/* and a layer's parameters, from the start of its 48 bytes. */
enum {
    LAY_CAPACITY = 0, LAY_FPP = 8, LAY_SHARE = 16, LAY_BLOCKS = 24, LAY_ITEMS = 32,
    LAY_PROBES = 40, LAY_RESERVED = 44
};
/* The head of a metadata pair: key_len and value_len. */
#define KV_HEAD 4u

/* The strings after the fixed header, in this order. */
enum { STR_NAME, STR_TABLE, STR_COLUMN, STR_POSITION, NSTR };
static const size_t snapshot_str_max[NSTR] = { SNAPSHOT_MAX_STRING, SNAPSHOT_MAX_STRING,
                                      SNAPSHOT_MAX_STRING, SNAPSHOT_MAX_POSITION };

static inline void put16(unsigned char *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static inline void put32(unsigned char *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static inline void put64(unsigned char *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static inline uint16_t get16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static inline uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static inline uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

static inline uint64_t fpp_bits(double p) { uint64_t v; memcpy(&v, &p, 8); return v; }
static inline double bits_fpp(uint64_t v) { double p; memcpy(&p, &v, 8); return p; }

#endif
