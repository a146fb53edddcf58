// Every pccl message, defined once: an enum of types (message.hpp) and one struct per message with an
// explicit encode and a bounds-checked decode, in one header per role. Byte layouts are specified in
// docs/protocol.md §5.
#ifndef PCCL_WIRE_MESSAGES_HPP_
#define PCCL_WIRE_MESSAGES_HPP_

#include "wire/control_messages.hpp"    // §5.2 peer <-> master membership
#include "wire/handshake_messages.hpp"  // §5.1 every connection's handshake, and Error
#include "wire/message.hpp"             // types, frame helpers
#include "wire/op_messages.hpp"         // §5.3 collective coordination
#include "wire/probe_messages.hpp"      // §5.7 link measurement
#include "wire/ring_messages.hpp"       // §5.4 ring connection hello

#endif  // PCCL_WIRE_MESSAGES_HPP_
