// Package bloomguard checks IDs against the filters bloomguard publishes
// ([server] publish_dir, /run/bloomguard/<name>.bgf under systemd) in the
// calling process, with no request to the daemon: cgo over libbloomguard
// (lib/bloomguard.h, Debian packages libbloomguard0 and libbloomguard-dev),
// which is built from the daemon's own lookup, spelling and staleness rule,
// so a lookup answers as the daemon's GET /exists would at that moment.
//
//	users, err := bloomguard.Open("/run/bloomguard/default.bgf", bloomguard.MissingOK)
//	if err != nil { ... }
//	if users.AbsentString(id) {
//		return notFound()     // surely not in the table: the daemon's 404
//	}
//	...                       // maybe, degraded, not ready: ask the database
//
// Only Absent may turn a request away.  One Filter serves any number of
// goroutines; it follows rebuilds, growth and a restarted daemon by itself.
package bloomguard

/*
#cgo pkg-config: bloomguard
#include <stdlib.h>
#include <bloomguard.h>
*/
import "C"

import (
	"io/fs"
	"unsafe"
)

// Answer is what a lookup says (enum bloomguard_answer).
type Answer int

const (
	// NotReady: no filter to ask (not there yet, withdrawn, unreadable):
	// let the request through.
	NotReady Answer = C.BLOOMGUARD_NOT_READY
	// Absent: surely not in the table, the daemon's 404.
	Absent Answer = C.BLOOMGUARD_ABSENT
	// Maybe: maybe in the table, the daemon's 200.
	Maybe Answer = C.BLOOMGUARD_MAYBE
	// Degraded: the filter says absent but the daemon cannot show it is
	// fresh (stopped, lost PostgreSQL) or the filter is saturated: as the
	// daemon's degraded 200, treat it as Maybe.
	Degraded Answer = C.BLOOMGUARD_DEGRADED
)

func (a Answer) String() string {
	switch a {
	case NotReady:
		return "not_ready"
	case Absent:
		return "absent"
	case Maybe:
		return "maybe"
	case Degraded:
		return "degraded"
	}
	return "unknown"
}

// Code says why Open failed, or why a filter is not ready (enum bloomguard_error).
type Code int

const (
	OK      Code = C.BLOOMGUARD_OK
	ENOENT  Code = C.BLOOMGUARD_ENOENT  // no file at the path
	EACCES  Code = C.BLOOMGUARD_EACCES  // the file or its directory may not be read
	EFORMAT Code = C.BLOOMGUARD_EFORMAT // not a published filter this library reads
	ESTALE  Code = C.BLOOMGUARD_ESTALE  // withdrawn, or from another boot
	ENOMEM  Code = C.BLOOMGUARD_ENOMEM
	EINVAL  Code = C.BLOOMGUARD_EINVAL // a relative path
	EIO     Code = C.BLOOMGUARD_EIO    // any other system error
)

func (c Code) String() string { return C.GoString(C.bloomguard_strerror(C.int(c))) }

// Error is Open's error.  errors.Is(err, fs.ErrNotExist) holds for
// ENOENT and errors.Is(err, fs.ErrPermission) for EACCES.
type Error struct {
	Code Code
	Path string
}

func (e *Error) Error() string { return "bloomguard: " + e.Path + ": " + e.Code.String() }

func (e *Error) Is(target error) bool {
	return (e.Code == ENOENT && target == fs.ErrNotExist) ||
		(e.Code == EACCES && target == fs.ErrPermission)
}

// MissingOK (Open's flag): a path without a usable file yet is not an
// error; lookups say NotReady until the daemon publishes it.
const MissingOK = C.BLOOMGUARD_OPEN_MISSING_OK

// Filter is one published filter, opened by path.
type Filter struct {
	h    *C.bloomguard
	path string
}

// Open maps the filter published at path (absolute).  With MissingOK a
// missing, withdrawn or unreadable file still gives a Filter (EFORMAT and
// EINVAL still fail).  Close it when no lookup runs on it any more.
func Open(path string, flags uint) (*Filter, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var err C.int
	h := C.bloomguard_open(cpath, C.uint(flags), &err)
	if h == nil {
		return nil, &Error{Code: Code(err), Path: path}
	}
	return &Filter{h: h, path: path}, nil
}

// The bytes of an empty ID: the library is given a valid pointer even for no bytes.
var empty [1]byte

// Lookup answers for id, the bytes the service would give PostgreSQL.
// Safe for concurrent use; after Close it says NotReady.
func (f *Filter) Lookup(id []byte) Answer {
	h := f.h
	if h == nil {
		return NotReady
	}
	p := unsafe.Pointer(&empty[0])
	if len(id) > 0 {
		p = unsafe.Pointer(&id[0])
	}
	return Answer(C.bloomguard_lookup(h, p, C.size_t(len(id))))
}

// LookupString is Lookup for a string, without copying it.
func (f *Filter) LookupString(id string) Answer {
	h := f.h
	if h == nil {
		return NotReady
	}
	p := unsafe.Pointer(&empty[0])
	if len(id) > 0 {
		// The string's bytes (its header's first word: unsafe.StringData
		// is Go 1.20's), which the library only reads.
		p = *(*unsafe.Pointer)(unsafe.Pointer(&id))
	}
	return Answer(C.bloomguard_lookup(h, p, C.size_t(len(id))))
}

// Absent is true only when id is surely not in the table.
func (f *Filter) Absent(id []byte) bool { return f.Lookup(id) == Absent }

// AbsentString is Absent for a string.
func (f *Filter) AbsentString(id string) bool { return f.LookupString(id) == Absent }

// Info is what a filter shows now (struct bloomguard_info).
type Info struct {
	Code         Code    // OK when a filter is mapped
	Why          string  // when not OK: what is wrong
	Name         string  // the filter's name
	Spelling     string  // the column type's spelling rule ("text", "int8", ...)
	Generation   uint64  // counts up with each rebuild of one daemon run
	Layers       uint    // layers mapped
	TargetFPP    float64 // the false-positive rate the filter keeps
	HorizonAge   float64 // seconds since the horizon; negative: none yet
	MaxStaleness float64 // seconds; 0 = never degraded by age
	Degraded     bool    // absent answers are degraded now
	Saturated    bool    // the filter cannot keep its rate any more
	PID          uint32  // the publishing daemon's process id
}

// Info returns what the filter shows now.
func (f *Filter) Info() Info {
	if f.h == nil {
		return Info{Code: EINVAL, Why: "closed", HorizonAge: -1}
	}
	var c C.struct_bloomguard_info
	C.bloomguard_info(f.h, &c)
	return Info{
		Code:         Code(c.error),
		Why:          C.GoString(&c.why[0]),
		Name:         C.GoString(&c.name[0]),
		Spelling:     C.GoString(&c.spelling[0]),
		Generation:   uint64(c.generation),
		Layers:       uint(c.layers),
		TargetFPP:    float64(c.target_fpp),
		HorizonAge:   float64(c.horizon_age),
		MaxStaleness: float64(c.max_staleness),
		Degraded:     c.degraded != 0,
		Saturated:    c.saturated != 0,
		PID:          uint32(c.pid),
	}
}

// Close unmaps the file.  No lookup may be running on the Filter or start
// afterwards in another goroutine; a second Close is a no-op.
func (f *Filter) Close() error {
	if f.h != nil {
		C.bloomguard_close(f.h)
		f.h = nil
	}
	return nil
}

// Path is the path the filter was opened with.
func (f *Filter) Path() string { return f.path }

// Version is libbloomguard's version, e.g. "0.1.0".
func Version() string { return C.GoString(C.bloomguard_version()) }
