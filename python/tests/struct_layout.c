/* Prints the size of every struct of pccl.h, the offset of each of its fields, and the values the _INIT
 * macros put in them, one "key value" line each. test_lowlevel.py compares them with the package's
 * ctypes mirrors (python/pccl/_lib.py). */
#include <pccl/pccl.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(T) printf("%s %zu\n", #T, sizeof(T))
#define OFF(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))

int main(void) {
  pcclCommConfig_t cc = PCCL_COMM_CONFIG_INIT;
  pcclReduceOptions_t ro = PCCL_REDUCE_OPTIONS_INIT;
  pcclSharedState_t ss = PCCL_SHARED_STATE_INIT;
  pcclMasterConfig_t mc = PCCL_MASTER_CONFIG_INIT;
  pcclCommStats_t cs = PCCL_COMM_STATS_INIT;
  pcclMasterStats_t ms = PCCL_MASTER_STATS_INIT;

  SIZE(pcclCommConfig_t);
  OFF(pcclCommConfig_t, struct_size); OFF(pcclCommConfig_t, config_version); OFF(pcclCommConfig_t, master_address);
  OFF(pcclCommConfig_t, listen_address); OFF(pcclCommConfig_t, advertise_host); OFF(pcclCommConfig_t, peer_group);
  OFF(pcclCommConfig_t, connections_per_peer); OFF(pcclCommConfig_t, heartbeat_interval_ms);
  OFF(pcclCommConfig_t, peer_timeout_ms); OFF(pcclCommConfig_t, connect_timeout_ms);
  OFF(pcclCommConfig_t, handshake_timeout_ms); OFF(pcclCommConfig_t, secret); OFF(pcclCommConfig_t, secret_len);
  OFF(pcclCommConfig_t, encrypt); OFF(pcclCommConfig_t, op_timeout_ms); OFF(pcclCommConfig_t, segment_bytes);
  OFF(pcclCommConfig_t, same_host_connections); OFF(pcclCommConfig_t, max_concurrent_ops);
  OFF(pcclCommConfig_t, master_reconnect_ms); OFF(pcclCommConfig_t, region); OFF(pcclCommConfig_t, algorithm);
  OFF(pcclCommConfig_t, gather_bytes); OFF(pcclCommConfig_t, inbound);

  SIZE(pcclReduceOptions_t);
  OFF(pcclReduceOptions_t, struct_size); OFF(pcclReduceOptions_t, tag); OFF(pcclReduceOptions_t, quant);
  OFF(pcclReduceOptions_t, compress); OFF(pcclReduceOptions_t, location);

  SIZE(pcclReduceInfo_t);
  OFF(pcclReduceInfo_t, tx_bytes); OFF(pcclReduceInfo_t, rx_bytes); OFF(pcclReduceInfo_t, world_size);
  OFF(pcclReduceInfo_t, time_s);

  SIZE(pcclTensorInfo_t);
  OFF(pcclTensorInfo_t, name); OFF(pcclTensorInfo_t, dtype); OFF(pcclTensorInfo_t, count); OFF(pcclTensorInfo_t, data);

  SIZE(pcclSharedState_t);
  OFF(pcclSharedState_t, struct_size); OFF(pcclSharedState_t, revision); OFF(pcclSharedState_t, count);
  OFF(pcclSharedState_t, infos); OFF(pcclSharedState_t, compress);

  SIZE(pcclSyncInfo_t);
  OFF(pcclSyncInfo_t, tx_bytes); OFF(pcclSyncInfo_t, rx_bytes); OFF(pcclSyncInfo_t, keys_received);
  OFF(pcclSyncInfo_t, revision); OFF(pcclSyncInfo_t, time_s);

  SIZE(pcclMasterConfig_t);
  OFF(pcclMasterConfig_t, struct_size); OFF(pcclMasterConfig_t, config_version); OFF(pcclMasterConfig_t, listen_address);
  OFF(pcclMasterConfig_t, secret); OFF(pcclMasterConfig_t, secret_len); OFF(pcclMasterConfig_t, heartbeat_interval_ms);
  OFF(pcclMasterConfig_t, peer_timeout_ms); OFF(pcclMasterConfig_t, handshake_timeout_ms);
  OFF(pcclMasterConfig_t, max_peers); OFF(pcclMasterConfig_t, max_pending_handshakes);
  OFF(pcclMasterConfig_t, max_concurrent_ops); OFF(pcclMasterConfig_t, encrypt);
  OFF(pcclMasterConfig_t, announce_window_ms); OFF(pcclMasterConfig_t, probe_budget_ms);
  OFF(pcclMasterConfig_t, probe_bytes); OFF(pcclMasterConfig_t, auto_optimize);
  OFF(pcclMasterConfig_t, standby); OFF(pcclMasterConfig_t, rebuild_window_ms); OFF(pcclMasterConfig_t, state_file);
  OFF(pcclMasterConfig_t, etcd_url); OFF(pcclMasterConfig_t, etcd_prefix); OFF(pcclMasterConfig_t, etcd_lease_ms);
  OFF(pcclMasterConfig_t, advertise_address);

  SIZE(pcclCommStats_t);
  OFF(pcclCommStats_t, struct_size); OFF(pcclCommStats_t, allreduce_ops); OFF(pcclCommStats_t, allreduce_aborts);
  OFF(pcclCommStats_t, allreduce_retries); OFF(pcclCommStats_t, sync_ops); OFF(pcclCommStats_t, sync_aborts);
  OFF(pcclCommStats_t, topology_updates); OFF(pcclCommStats_t, tx_bytes); OFF(pcclCommStats_t, rx_bytes);
  OFF(pcclCommStats_t, epoch); OFF(pcclCommStats_t, last_allreduce_time_s);
  OFF(pcclCommStats_t, last_allreduce_bytes_per_s); OFF(pcclCommStats_t, same_host_read_bytes);
  OFF(pcclCommStats_t, master_losses); OFF(pcclCommStats_t, master_returns); OFF(pcclCommStats_t, master_away_ms);
  OFF(pcclCommStats_t, ring_reconnects); OFF(pcclCommStats_t, ring_resent_bytes); OFF(pcclCommStats_t, ring_stalled_ms);
  OFF(pcclCommStats_t, ring_active_connections); OFF(pcclCommStats_t, ring_connection_changes);
  OFF(pcclCommStats_t, relayed_bytes);

  SIZE(pcclMasterStats_t);
  OFF(pcclMasterStats_t, struct_size); OFF(pcclMasterStats_t, accepted); OFF(pcclMasterStats_t, pending);
  OFF(pcclMasterStats_t, building); OFF(pcclMasterStats_t, epoch); OFF(pcclMasterStats_t, connections);
  OFF(pcclMasterStats_t, collectives); OFF(pcclMasterStats_t, measuring);
  OFF(pcclMasterStats_t, topology_surveys); OFF(pcclMasterStats_t, links_measured);
  OFF(pcclMasterStats_t, links_known); OFF(pcclMasterStats_t, predicted_bottleneck);
  OFF(pcclMasterStats_t, join_order_bottleneck); OFF(pcclMasterStats_t, role); OFF(pcclMasterStats_t, term);
  OFF(pcclMasterStats_t, takeovers); OFF(pcclMasterStats_t, step_downs);
  OFF(pcclMasterStats_t, unreachable);

  SIZE(pcclLink_t);
  OFF(pcclLink_t, from_rank); OFF(pcclLink_t, to_rank); OFF(pcclLink_t, bandwidth); OFF(pcclLink_t, rtt_s);

  /* What the _INIT macros set (the fields a Python mirror must reproduce). Pointer fields are NULL. */
  printf("init.pcclCommConfig_t.region %s\n", cc.region == NULL ? "NULL" : "set");
  printf("max_region_len %d\n", PCCL_MAX_REGION_LEN);
  printf("init.pcclCommConfig_t.gather_bytes %lld\n", (long long)cc.gather_bytes);
  printf("init.pcclCommConfig_t.inbound %d\n", (int)cc.inbound);
  printf("init.pcclCommConfig_t %u %u %u %u %u %u %u %u %d %u %u %u %u %lld\n", cc.struct_size, cc.config_version,
         cc.peer_group, cc.connections_per_peer, cc.heartbeat_interval_ms, cc.peer_timeout_ms, cc.connect_timeout_ms,
         cc.handshake_timeout_ms, cc.encrypt, cc.op_timeout_ms, cc.segment_bytes, cc.same_host_connections,
         cc.max_concurrent_ops, (long long)cc.master_reconnect_ms);
  printf("init.pcclReduceOptions_t %u %llu %d %d %d\n", ro.struct_size, (unsigned long long)ro.tag, (int)ro.quant,
         ro.compress, (int)ro.location);
  printf("init.pcclSharedState_t %u %llu %zu %d\n", ss.struct_size, (unsigned long long)ss.revision, ss.count,
         ss.compress);
  printf("init.pcclMasterConfig_t %u %u %zu %u %u %u %u %u %u %d %u %u %llu %d %d %u %u\n", mc.struct_size,
         mc.config_version, mc.secret_len, mc.heartbeat_interval_ms, mc.peer_timeout_ms, mc.handshake_timeout_ms,
         mc.max_peers, mc.max_pending_handshakes, mc.max_concurrent_ops, mc.encrypt, mc.announce_window_ms,
         mc.probe_budget_ms, (unsigned long long)mc.probe_bytes, mc.auto_optimize, mc.standby, mc.rebuild_window_ms,
         mc.etcd_lease_ms);
  printf("init.pcclCommStats_t %u\n", cs.struct_size);
  printf("init.pcclMasterStats_t %u\n", ms.struct_size);
  printf("version %d\n", PCCL_VERSION_CODE);
  printf("config_version %d\n", PCCL_CONFIG_VERSION);
  return 0;
}
