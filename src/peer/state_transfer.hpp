// The peer-to-peer half of a shared-state sync (docs/protocol.md §5.6): out-of-date peers fetch the
// bytes of the keys their SyncPlan lists from the peers it names, over dedicated connections
// (handshake role kStateFetch), striped in chunks across every source and K connections to each.
//
//   fetcher ──request (DataHeader flags kDataRequest; key name, byte offset, length, zstd level)──► source
//   fetcher ◄──response (DataHeader: the same sequence number and offset; raw or zstd bytes)── source
//
// Responses are read straight into the fetcher's buffer (zstd ones through staging), and sent
// straight from the source's buffer: no copies beyond the kernel's. Requests start once every
// connection is up (the first ones round-robin, so each source gets a share); then each connection
// keeps a few in flight and, when an answer arrives, asks for the next chunk its source can give,
// so faster sources carry more. The fetcher verifies digests afterwards (not here: that is CPU work
// for the calling thread).
// Thread: the communicator's io thread, for both classes.
#ifndef PCCL_PEER_STATE_TRANSFER_HPP_
#define PCCL_PEER_STATE_TRANSFER_HPP_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codec/compress.hpp"
#include "net/data_channel.hpp"
#include "net/handshake.hpp"
#include "util/clock.hpp"

namespace pccl::peer {

// One request's bytes at most. 1 MiB balances the tail of a transfer over many flows better than
// 4 MiB (transatlantic emulation, 256 MiB from 3 sources: 11.9 s against 13.8 s).
inline constexpr size_t kStateChunkBytes = size_t{1} << 20;
inline constexpr size_t kStateRequestDepth = 2;               // requests in flight per connection
inline constexpr size_t kMaxStateConnections = 1024;          // served at once; more are refused

// Serves this peer's shared state to fetchers while a sync it takes part in runs.
class StateServer : public net::DataSink {
 public:
  struct Span {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };

  StateServer() = default;
  ~StateServer() override;

  // Serves `keys` for sync `sync_id` until stop(); requests that arrived before are answered now.
  void serve(uint64_t sync_id, std::map<std::string, Span> keys);
  // Stops serving and closes every state connection (pending responses are dropped).
  void stop(const Status& why);
  // An authenticated kStateFetch connection; its frames must carry `epoch`.
  void adopt(net::Link link, uint64_t epoch);
  uint64_t bytesSent() const { return tx_bytes_; }

  Result<net::Placement> place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) override;
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override;
  void channelClosed(net::DataChannel& ch, const Status& why) override;

 private:
  uint64_t sync_id_ = 0;  // being served; 0: none
  uint64_t last_sync_id_ = 0;
  std::map<std::string, Span> keys_;
  std::vector<std::shared_ptr<net::DataChannel>> conns_;
  std::vector<std::weak_ptr<net::DataChannel>> paused_;  // asked about a sync not yet served
  codec::Compressor compressor_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> spare_;  // compression buffers for reuse
  uint64_t tx_bytes_ = 0;
};

struct FetchSource {
  net::HostPort address;
  std::string name;          // for messages: "peer 1a2b3c4d"
  uint32_t connections = 1;  // parallel connections to it
};

struct FetchKey {
  std::string name;
  uint8_t* data = nullptr;     // where the elected bytes go
  size_t bytes = 0;
  std::vector<size_t> sources;  // indices into FetchPlan::sources
};

struct FetchPlan {
  uint64_t sync_id = 0;
  uint64_t epoch = 0;
  std::vector<FetchSource> sources;
  std::vector<FetchKey> keys;
  int compress = 0;  // zstd level asked of the sources; 0: raw
  size_t chunk_bytes = kStateChunkBytes;
  Millis handshake_timeout{5000};
  // A connection that breaks (a reset, a timeout, the peer's end closing) or whose dial fails is dialled
  // again for this long, counted from the break until an answer arrives on it again; meanwhile the
  // requests it had not been answered go to the other connections. (The peer timeout: a source that
  // stays unreachable longer is lost.)
  Millis redial_window{10000};
};

// Fetches every key of a plan. Fails as a whole on a bad response, a connection that stays broken
// longer than the plan's redial window, or cancel(); a break that heals costs time, not the fetch.
class StateFetcher : public net::DataSink, public std::enable_shared_from_this<StateFetcher> {
 public:
  using Done = std::function<void(const Status&, uint64_t rx_bytes)>;
  // Bytes [offset, offset + length) of key `key` are in place (they are never written again).
  using Arrived = std::function<void(size_t key, size_t offset, size_t length)>;

  StateFetcher(asio::io_context& io, std::shared_ptr<const net::AuthKey> key);
  ~StateFetcher() override;

  void start(FetchPlan plan, Done done, Arrived arrived = nullptr);
  void cancel(const Status& why);  // `done` runs with `why` unless it already ran

  Result<net::Placement> place(net::DataChannel& ch, const wire::DataHeader& h, uint32_t bytes) override;
  Status deliver(net::DataChannel& ch, const wire::DataHeader& h, const uint8_t* data, uint32_t bytes) override;
  void channelClosed(net::DataChannel& ch, const Status& why) override;

 private:
  struct Request {
    uint32_t seq = 0;
    size_t key = 0;
    size_t offset = 0;
    size_t length = 0;
  };
  struct Conn {
    size_t source = 0;
    std::shared_ptr<net::DataChannel> channel;  // null until connected, and while broken
    std::deque<Request> outstanding;
    TimePoint broken_since{};  // the first break (or failed dial) not yet healed by an answer
    bool broken = false;
    uint32_t redials = 0;      // since broken_since
    bool settled = false;      // dialled once, up or broken (requests start when every connection is)
  };

  void dial(size_t conn);
  // A connection's dial failed or its channel closed with `why`: dialled again (its unanswered requests
  // to the others meanwhile) while the break is within the redial window and `why` is the network's.
  void broke(size_t conn, const Status& why);
  // Connection `conn` has been dialled once (up or broken); when every one has, requests start.
  void settled(size_t conn);
  // Sends requests on `conn` until `depth` are in flight (once every connection is up).
  void refill(size_t conn, size_t depth = kStateRequestDepth);
  bool nextChunk(size_t source, Request* out);
  Conn* connOf(const net::DataChannel& ch);
  void maybeDone();
  void finish(const Status& s);

  asio::io_context& io_;
  std::shared_ptr<const net::AuthKey> auth_;
  FetchPlan plan_;
  Done done_;
  Arrived arrived_;
  bool over_ = true;
  std::vector<Conn> conns_;
  std::vector<size_t> next_offset_;  // per key: bytes already requested
  size_t first_open_ = 0;            // keys before it are fully requested
  size_t settled_ = 0;               // connections dialled once (up or broken); requests start when all are
  bool started_ = false;
  std::deque<Request> retry_;        // requests a broken connection had not been answered, asked again first
  uint32_t next_seq_ = 0;
  uint64_t rx_bytes_ = 0;
  codec::Compressor decompressor_;
};

// A request's payload: u64 length | u8 zstd level | string key name. Exposed for tests.
std::vector<uint8_t> encodeStateRequest(uint64_t length, uint8_t level, const std::string& name);
struct StateRequest {
  uint64_t length = 0;
  uint8_t level = 0;
  std::string name;
};
Result<StateRequest> decodeStateRequest(const uint8_t* data, size_t size);

}  // namespace pccl::peer

#endif  // PCCL_PEER_STATE_TRANSFER_HPP_
