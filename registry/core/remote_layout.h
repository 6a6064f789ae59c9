// Where cache objects live in a shared remote cache (Redis), format 1.
//
// A team points every machine at one Redis (REGISTRY_REMOTE_CACHE). A cache
// object travels as the two files a local build publishes under
// v1/objects/<key>/ (see cache_store.h): its index record entry.toml and its
// artifact. Nothing else of the folder travels (build.log, used). The remote
// holds bytes only; trust comes from verification on the way in: a fetched
// object is written to a staging folder and published with
// CacheStore::adopt(), which checks the record's format and key and the
// artifact's size and XXH3-128 exactly as a local lookup does.
//
// Keys (all under the prefix "kreg:v1:", so a future format never misreads
// these and ccache's own "ccache:" keys never collide):
//
//   kreg:v1:object:<key>    a hash with two fields, written by one HSET and
//                           read by one HMGET, so no reader ever sees a record
//                           without its artifact or a half-written upload:
//                             record    entry.toml's text
//                             artifact  the artifact's bytes
//   kreg:v1:kernel:<kernel> a set of the object keys stored for that kernel,
//                           for listing; added in the same MULTI/EXEC as the
//                           object (a listed key may since have been evicted)
//   kreg:v1:claim:<key>     "<host> pid=<pid>": a process on some machine is
//                           building <key> (SET NX with a short expiry that
//                           its builder keeps renewing). Others wait for the
//                           object instead of building it too; a builder that
//                           dies stops renewing, and its claim expires.
//   kreg:v1:file:<path>     one small cache record by its path relative to
//                           v1/ (e.g. a dependency record); a string, written
//                           by one SET. Such records are verified by whoever
//                           reads them, as when read from the local disk.
//
// Objects are immutable once stored: a key names one content. Two machines
// building one key may upload different bytes; each upload is whole, and
// either verifies against its own record.
#pragma once

#include <string>

namespace kreg {

inline constexpr int kRemoteFormat = 1;

// Each throws std::invalid_argument for a name that could escape its place:
// an empty one, one with a NUL, a ':' where a key or kernel name goes, or a
// path with "..", "." or empty components, or a leading '/'.
std::string remote_object_key(const std::string& key_hex);
std::string remote_kernel_key(const std::string& kernel);
std::string remote_claim_key(const std::string& key_hex);
std::string remote_file_key(const std::string& relative_path);

}  // namespace kreg
