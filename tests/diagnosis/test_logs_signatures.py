"""Each log signature matches its real-world lines and extracts the useful fields.

Covers: every signature in the shipped catalog has a case here; kernel XID lines with and
without pid/name; fallen-off-the-bus without an Xid; NCCL IB completion errors in the 2.10,
2.20 and 2.29 formats; NCCL transport selection and TCP fallback; PyTorch watchdog timeouts and
progress markers in their three versions; torch elastic failures; CUDA/NVML error strings;
Kubernetes and device-plugin lines; vLLM and dcgm-exporter lines. Lines are verbatim from
shared/DOMAIN.md wherever it quotes one (split only to fit the line length); the rest follow
the format strings DOMAIN.md cites.
"""

from __future__ import annotations

import pytest

from bot.diagnosis.logs import LogMatch, classify_text, load_log_catalog
from runbooks import LOG_SIGNATURES_FILE

CATALOG = load_log_catalog(LOG_SIGNATURES_FILE)

# (signature, line, fields the match must carry)
CASES: list[tuple[str, str, dict[str, str]]] = [
    # --- kernel -----------------------------------------------------------------------------
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.",
        {"xid": "79", "pci": "0000:44:00", "detail": "GPU has fallen off the bus."},
    ),
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:01:00): 31, pid=13705, name=UnrealEditor, channel 0x0000000c, "
        "intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 GPCCLIENT_PROP_0 faulted @ "
        "0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
        {"xid": "31", "pci": "0000:01:00", "pid": "13705", "process": "UnrealEditor"},
    ),
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 …)",
        {"xid": "149", "detail": "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 …)"},
    ),
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        {"xid": "79", "pci": "0000:2b:00"},
    ),
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.",
        {"xid": "79", "process": "<unknown>", "detail": "GPU has fallen off the bus."},
    ),
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:02:00): 154, GPU recovery action changed from 0x0 (None) "
        "to 0x2 (Node Reboot Required)",
        {"xid": "154", "recovery_action": "Node Reboot Required"},
    ),
    (
        "kernel.xid",
        "NVRM: Xid (PCI:0000:1b:00): 45, pid=5120, name=python, Ch 00000010, "
        "caused by previous Xid 145",
        {"xid": "45", "caused_by": "145", "pid": "5120"},
    ),
    (
        "kernel.gpu_fallen_off_bus",
        "NVRM: The NVIDIA GPU 0000:b3:00.0 … has fallen off the bus and is not responding "
        "to commands.",
        {"pci": "0000:b3:00.0"},
    ),
    (
        "kernel.gpu_fallen_off_bus",
        "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.",
        {"pci": "0000:2b:00.0"},
    ),
    (
        "kernel.nvrm_api_mismatch",
        "NVRM: API mismatch: the client has the version 367.44, but NVRM: this kernel module "
        "has the version 367.35.",
        {"client_version": "367.44", "module_version": "367.35"},
    ),
    ("kernel.gsp_timeout", "_kgspLogRpcTimeout … GSP Timeout", {}),
    (
        "kernel.gsp_timeout",
        "NVRM: Xid (PCI:0000:01:00): 119, Timeout after 6s of waiting for RPC response from "
        "GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 1321",
        {"seconds": "6", "gpu": "0", "function": "76", "function_name": "GSP_RM_CONTROL"},
    ),
    (
        "kernel.gsp_timeout",
        "[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ******************** GSP Timeout "
        "********************",
        {"gpu_index": "6"},
    ),
    (
        "kernel.gsp_timeout",
        "NVRM: GPU3 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 41 heartbeat 7",
        {"gpu_index": "3"},
    ),
    (
        "kernel.mlx5_link_down",
        "[ 9120.331201] mlx5_core 0000:9a:00.1 ibp154s0f1: Link down",
        {"pci": "0000:9a:00.1", "interface": "ibp154s0f1"},
    ),
    (
        "kernel.mlx5_cable_error",
        "mlx5_core 0000:9a:00.0: mlx5_port_module_event:1171:(pid 0): Port module "
        "event[error]: module 0, Cable error, High Temperature",
        {
            "pci": "0000:9a:00.0",
            "module": "0",
            "status": "Cable error",
            "reason": "High Temperature",
        },
    ),
    (
        "kernel.pcie_aer",
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
        "(Transmitter ID)",
        {
            "pci": "0000:00:03.0",
            "aer_severity": "Corrected",
            "type": "Data Link Layer",
            "agent": "Transmitter ID",
        },
    ),
    (
        "dcgm.clocks_event_violation",
        "Detected clocks event due to thermal violation … Verify that the cooling on this "
        "machine is functional",
        {"reason": "thermal"},
    ),
    # --- NCCL IB / network --------------------------------------------------------------------
    (
        "nccl.ib.completion_error",
        "NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv) localGid fd00:… remoteGidsfd00:…",
        {
            "peer": "10.216.210.236<54862>",
            "status": "12",
            "opcode": "0",
            "len": "0",
            "vendor_err": "129",
            "request": "Recv",
        },
    ),
    (  # 2.10-2.19: `with error %d, opcode %d, len %d, vendor err %d`
        "nccl.ib.completion_error",
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<40212> with error 12, opcode 0, "
        "len 0, vendor err 129",
        {"peer": "10.0.0.7<40212>", "status": "12", "vendor_err": "129"},
    ),
    (  # 2.29+: `status=%s(%d) opcode=%s(%d) vendor_err=%u … hca %s`
        "nccl.ib.completion_error",
        "NCCL WARN NET/IB: Got completion from peer 10.0.0.7<40212> with "
        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128) vendor_err=129 (Recv) "
        "hca mlx5_3",
        {
            "status": "12",
            "status_name": "IBV_WC_RETRY_EXC_ERR",
            "opcode": "128",
            "opcode_name": "IBV_WC_RECV",
            "vendor_err": "129",
            "hca": "mlx5_3",
        },
    ),
    (
        "nccl.ib.retry_exceeded",
        "HINT: In many cases this error occurs when the NCCL_IB_TIMEOUT is set too short.",
        {},
    ),
    (
        "nccl.ib.acs_enabled",
        "HINT: In many cases this error occurs when ACS is enabled which would break GPU "
        "Direct RDMA protocol.",
        {},
    ),
    (
        "nccl.ib.async_port_error",
        "NCCL WARN NET/IB : Got async event : port error",
        {"event": "port error"},
    ),
    (
        "nccl.ib.async_port_error",
        "NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)",
        {"device": "mlx5_0", "port": "1", "event": "port error", "event_code": "10"},
    ),
    ("nccl.ib.no_device", "NCCL INFO NET/IB : No device found.", {}),
    ("nccl.net.socket_fallback", "NCCL INFO NET/Socket : Using [0]eth0…", {"interface": "eth0"}),
    ("nccl.net.socket_fallback", "NCCL INFO Using network Socket", {}),
    ("nccl.net.socket_fallback", "NCCL INFO Channel 00/0 : 0[0] -> 8[0] via NET/Socket/0", {}),
    (
        "nccl.net.ib_selected",
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ibs65:10.10.10.101<0>",
        {"device": "mlx5_0", "port": "1", "transport": "IB"},
    ),
    (
        "nccl.net.ib_selected",
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [RO]; OOB ib0:10.0.0.5<0>",
        {"device": "mlx5_0", "transport": "IB", "sharp": "/SHARP"},
    ),
    (
        "nccl.net.ib_selected",
        "NCCL INFO NET/IB : Using [0]mlx5_2:1/RoCE [RO]; OOB eth0:10.0.0.5<0>",
        {"device": "mlx5_2", "transport": "RoCE"},
    ),
    ("nccl.net.ib_selected", "NCCL INFO Using network IB", {"network": "IB"}),
    ("nccl.net.ib_selected", "NCCL INFO Using network IBext", {"network": "IBext"}),
    (
        "nccl.nvls.fabric_manager",
        "transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
        {"cuda_error": "1", "error": "invalid argument"},
    ),
    (
        "nccl.socket.peer_closed",
        "misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer <host><port>",
        {"peer": "<host><port>"},
    ),
    (
        "nccl.proxy.connection_error",
        "proxy.cc:1485 NCCL WARN [Service thread] Error encountered progressing "
        "operation=Connect, res=2, closing connection",
        {"operation": "Connect", "res": "2"},
    ),
    (
        "nccl.remote_error",
        "NCCL error: remote process exited or there was a network error",
        {},
    ),
    # --- PyTorch ProcessGroupNCCL -------------------------------------------------------------
    (
        "torch.nccl.watchdog_timeout",
        "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
        "NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 "
        "milliseconds before timing out.",
        {
            "rank": "0",
            "seqnum": "1",
            "optype": "BROADCAST",
            "numel_in": "131072000",
            "numel_out": "131072000",
            "timeout_ms": "600000",
            "ran_for_ms": "600081",
        },
    ),
    (
        "torch.nccl.watchdog_timeout",
        "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 "
        "milliseconds before timing out.",
        {
            "rank": "0",
            "seqnum": "96120",
            "optype": "ALLREDUCE",
            "timeout_ms": "1800000",
            "ran_for_ms": "25624887",
        },
    ),
    (
        "torch.nccl.progress_marker",
        "[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: "
        "1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.",
        {"pg": "1", "rank": "0", "work": "1580", "last_enqueued": "1582", "last_completed": "1579"},
    ),
    (
        "torch.nccl.progress_marker",
        "[PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, "
        "last completed NCCL work: 158045.",
        {
            "pg": "1",
            "rank": "1",
            "work": "158046",
            "last_enqueued": "158046",
            "last_completed": "158045",
        },
    ),
    (
        "torch.nccl.progress_marker",
        "[PG ID 0 PG GUID 0(default_pg) Rank 118]  failure detected by watchdog at work "
        "sequence id: 2398459 PG status: last enqueued work: 2398578, last completed work: "
        "2398458",
        {
            "pg": "0",
            "rank": "118",
            "work": "2398459",
            "last_enqueued": "2398578",
            "last_completed": "2398458",
        },
    ),
    (
        "torch.nccl.dump_signal_first_collective",
        "Received a dump signal due to a collective timeout from this local rank and we will "
        "try our best to dump the debug info. Last enqueued NCCL work: -1, last completed "
        "NCCL work: -1.This is most likely caused by incorrect usages of collectives, e.g., "
        "wrong sizes used across ranks, the order of collectives is not same for all ranks or "
        "the scheduled collective, for some reason, didn't run. Additionally, this can be "
        "caused by GIL deadlock or other reasons such as network errors or bugs in the "
        "communications library (e.g. NCCL), etc.",
        {"last_enqueued": "-1", "last_completed": "-1"},
    ),
    (
        "torch.nccl.dump_signal",
        "Received a dump signal due to a collective timeout from this local rank and we will "
        "try our best to dump the debug info. Last enqueued NCCL work: 5020, last completed "
        "NCCL work: 5019.",
        {"last_enqueued": "5020", "last_completed": "5019"},
    ),
    (
        "torch.nccl.heartbeat_stuck",
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
        "monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., "
        "CudaEventDestroy) hang blocking the watchdog, and could be triggered by another "
        "thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other "
        "deadlock-prone behaviors.",
        {"seconds": "480"},
    ),
    (
        "torch.nccl.heartbeat_stuck",
        "Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
        {},
    ),
    (
        "torch.nccl.watchdog_cuda_error",
        "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with "
        "exception: CUDA error: uncorrectable ECC error encountered",
        {"rank": "1", "error": "uncorrectable ECC error encountered"},
    ),
    (
        "torch.nccl.watchdog_cuda_error",
        "[PG ID 2 PG GUID 3 Rank 0] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered",
        {"pg": "2", "rank": "0", "error": "an illegal memory access was encountered"},
    ),
    (
        "torch.nccl.teardown",
        "Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
        "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        {},
    ),
    (
        "torch.nccl.teardown",
        "To avoid data inconsistency, we are taking the entire process down.",
        {},
    ),
    # --- torch elastic ------------------------------------------------------------------------
    (
        "torch.elastic.child_failed",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) "
        "local_rank: 0 (pid: 218624) of binary: /home/…/bin/python",
        {"exitcode": "-6", "local_rank": "0", "pid": "218624"},
    ),
    (
        "torch.elastic.child_failed",
        "E1223 05:18:02.971000 3304089 site-packages/torch/distributed/elastic/"
        "multiprocessing/api.py:882] failed (exitcode: -11) local_rank: 0 …",
        {"exitcode": "-11", "local_rank": "0"},
    ),
    (
        "torch.elastic.child_failed_error",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        {},
    ),
    # --- CUDA / NVML --------------------------------------------------------------------------
    ("cuda.uncorrectable_ecc", "RuntimeError: CUDA error: uncorrectable ECC error encountered", {}),
    ("cuda.illegal_memory_access", "CUDA error: an illegal memory access was encountered", {}),
    ("cuda.illegal_memory_access", "= 700 (an illegal memory access was encountered)", {}),
    ("cuda.nvlink_uncorrectable", "RuntimeError: CUDA error: uncorrectable NVLink error", {}),
    ("cuda.unknown_error_999", "NCCL WARN Cuda failure 999 'unknown error'", {}),
    ("cuda.device_busy_unavailable", "CUDA-capable device(s) is/are busy or unavailable", {}),
    (
        "cuda.out_of_memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        {"tried": "2.00 GiB"},
    ),
    (
        "nvml.driver_library_mismatch",
        "Failed to initialize NVML: Driver/library version mismatch",
        {},
    ),
    (
        "nvml.driver_library_mismatch",
        "nvidia-container-cli: initialization error: nvml error: driver/library version "
        "mismatch: unknown",
        {},
    ),
    # --- Kubernetes / device plugin -----------------------------------------------------------
    ("k8s.oom_killed", "Last State:  Terminated   Reason: OOMKilled   Exit Code: 137", {}),
    (
        "k8s.oom_killed",
        'kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} 1',
        {},
    ),
    ("k8s.oom_killed", "Warning  OOMKilling  node/gpu-node-07  Memory cgroup out of memory", {}),
    (
        "k8s.oom_killed",
        "Memory cgroup out of memory: Killed process 4242 (pt_main_thread) total-vm:9kB",
        {"pid": "4242", "process": "pt_main_thread"},
    ),
    ("k8s.eviction_memory", "The node was low on resource: memory.", {}),
    (
        "k8s.insufficient_gpu",
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.",
        {"available": "0", "nodes": "2"},
    ),
    (
        "device_plugin.marked_unhealthy",
        "XidCriticalError: Xid=48 on Device=GPU-5f2c0f7e-1d2b-4a7c-9f55-0c1f6b0e3a11; "
        "marking device as unhealthy.",
        {"xid": "48", "device": "GPU-5f2c0f7e-1d2b-4a7c-9f55-0c1f6b0e3a11"},
    ),
    (
        "device_plugin.marked_unhealthy",
        "'nvidia.com/gpu' device marked unhealthy: GPU-…",
        {"device": "GPU-…"},
    ),
    (
        "device_plugin.marked_unhealthy",
        "XidCriticalError: Xid=69 on Device=GPU-…, the device will go unhealthy.",
        {"xid": "69", "device": "GPU-…"},
    ),
    # --- vLLM ---------------------------------------------------------------------------------
    (
        "vllm.preemption",
        "WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group 147 is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
        "affect the end-to-end performance. Increase gpu_memory_utilization or "
        "tensor_parallel_size to provide more KV cache memory. "
        "total_num_cumulative_preemption=1",
        {"seq_group": "147", "mode": "RECOMPUTE", "total_preemptions": "1"},
    ),
    (
        "vllm.kv_cache_stats",
        "INFO 07-28 06:40:59 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 239.2 tokens/s, Running: 8 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 91.2%, Prefix cache hit rate: 0.0%",
        {
            "engine": "000",
            "generation_tps": "239.2",
            "running": "8",
            "waiting": "0",
            "kv_cache_pct": "91.2",
        },
    ),
    # --- dcgm-exporter ------------------------------------------------------------------------
    (
        "exporter.dcgm_dcp_not_collecting",
        "Not collecting DCP metrics: This request is serviced by a module of DCGM that is not "
        "currently loaded",
        {"reason": "This request is serviced by a module of DCGM that is not currently loaded"},
    ),
    (
        "exporter.dcgm_metric_skipped",
        "Skipping line 21 ('DCGM_FI_PROF_PIPE_TENSOR_ACTIVE'): metric not enabled",
        {"csv_line": "21", "metric": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
    ),
    (
        "exporter.dcgm_watch_failed",
        'level=fatal msg="Failed to watch metrics: Error watching fields: The third-party '
        'Profiling module returned an unrecoverable error"',
        {
            "reason": "Error watching fields: The third-party Profiling module returned an "
            "unrecoverable error"
        },
    ),
    # --- job context --------------------------------------------------------------------------
    ("checkpoint.saving", "Saving model checkpoint to /out/checkpoint-500", {}),
    (
        "checkpoint.saving",
        "[2024-05-01 12:00:00] saving checkpoint at iteration    1000 to /ckpt",
        {"step": "1000"},
    ),
    # --- intake of real pastes (issue 22): lines verbatim from tests/corpus/pastes -------------
    (
        "kernel.rm_init_adapter_failed",
        "Dec  2 11:49:53 worker4 kernel: [  885.242168] NVRM: GPU 0000:0a:00.0: "
        "RmInitAdapter failed! (0x24:0x72:1568)",
        {"pci": "0000:0a:00.0"},
    ),
    (
        "kernel.reset_required",
        "NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] "
        "(0x00000062) returned from status @ kernel_channel.c:2874",
        {},
    ),
    (
        "kernel.nvrm_probe_conflict",
        "[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).",
        {"devices": "3"},
    ),
    (
        "kernel.nvlink_link_failed",
        "Jul 09 10:42:47 pool0-0082 kernel: NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting "
        "peer0's postRxDetLinkMask failed!",
        {},
    ),
    ("dcgm.xid_detected", "Detected XID 145 for GPU 0 Please consult the documentation",
     {"xid": "145", "gpu": "0"}),
    (
        "dcgm.profiling_unrecoverable",
        "[Profiling] Got error from GetSamples: -37 The third-party Profiling module returned "
        "an unrecoverable error",
        {},
    ),
    (
        "fabric_manager.failed",
        "11月 15 14:15:47 leon-NF5468M6 systemd[1]: nvidia-fabricmanager.service: Control "
        "process exited, code=exited, status=1/FAILURE",
        {},
    ),
    (
        "cuda.system_not_ready",
        'CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) '
        '"cudaSetDevice(currentDevice)"',
        {},
    ),
    (
        "cuda.driver_insufficient",
        "Failed to allocate device vector A (error code CUDA driver version is insufficient for "
        "CUDA runtime version)!",
        {},
    ),
    (
        "nvml.gpu_lost",
        "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the "
        "system to recover this GPU",
        {"pci": "0000:02:00.0", "reason": "GPU is lost"},
    ),
    (
        "container.driver_error",
        "stderr: nvidia-container-cli.real: initialization error: driver error: failed to "
        "process request: unknown",
        {},
    ),
    (
        "k8s.crash_loop",
        "gpu-operator-657c5b798d-xgvgc                                0/1     CrashLoopBackOff"
        "   12 (4m24s ago)   67m",
        {},
    ),
    ("device_plugin.fs_watcher_failed", "2019/10/30 11:16:23 Failed to created FS watcher.", {}),
    (
        "exporter.start_failed",
        'time="2020-07-21T18:49:33Z" level=fatal msg="Error starting nv-hostengine: DCGM '
        'initialization error"',
        {"reason": "DCGM initialization error"},
    ),
    (
        "nccl.ib.catastrophic",
        "container-e275:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : "
        "local catastrophic error",
        {},
    ),
    (
        "nccl.ib.completion_truncated",
        "NET/IBP:Got completion from peer 7.6.13.83<36315> with status",
        {"peer": "7.6.13.83<36315>"},
    ),
    (
        "vllm.kv_cache_no_memory",
        "INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0, # CPU blocks: 256",
        {},
    ),
    (
        "vllm.preempted_resumed",
        "INFO 08-21 07:17:09 [scheduler.py:495] Preempted request "
        "cmpl-e5951453df7d471e8aac25957dbc9096-0 has been resumed!",
        {"request": "cmpl-e5951453df7d471e8aac25957dbc9096-0"},
    ),
    (
        "vllm.engine_died",
        "2025-11-02 13:17:04,315 - vllm.v1.engine.core_client - ERROR - Engine core proc "
        "EngineCore_DP0 died unexpectedly, shutting down client.",
        {"proc": "EngineCore_DP0"},
    ),
    (
        "slurm.gres_mismatch",
        "slurmctld: error: Setting node nodegpu1 state to INVAL with reason:gres/gpu count "
        "reported lower than configured (3 < 4)",
        {},
    ),
    (
        "slurm.gres_conf_error",
        "Feb 02 09:52:07 bibigrid-worker slurmd[12912]: slurmd: fatal: can't stat gres.conf "
        "file /dev/nvidia0: No such file or directory",
        {},
    ),
    ("slurm.node_drained", "compute*     up   infinite      3  drain compute[001-003]",
     {"state": "drain"}),
    (
        "slurm.unexpected_reboot",
        "Anything Else: Reason=Node unexpectedly rebooted [slurm@2022-07-23T15:31:00]",
        {},
    ),
    (
        "slurm.spank_error",
        "Feb 22 17:46:38 ip-10-1-74-228 slurmd[13562]: spank-epilog: error: pyxis: mkdir: "
        "cannot create directory '/opt/dlami/nvme/tmp/enroot/data': Permission denied",
        {"plugin": "pyxis"},
    ),
    (
        "nhc.check_failed",
        "ERROR:  nhc:  Health check failed:  check_hw_ib:  No IB port is ACTIVE (LinkUp 100 "
        "Gb/sec).",
        {"check": "check_hw_ib"},
    ),
    ("nhc.xid_found", "Found XID errors: 63", {"xid": "63"}),
    (
        "ib.ibpanic",
        "ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed: No such file or directory",
        {"hca": "mlx5_8"},
    ),
    (
        "ib.link_down_polling",
        '0x0000000000200005 "               hxa-su2-leaf-r2"      9   34[  ] ==(                '
        'Down/ Polling)==>             [  ] "" ( )',
        {},
    ),
    (
        "ib.sm_timeout",
        "Mar 11 19:32:26 717944 [EC430700] 0x01 -> log_send_error: ERR 5411: DR SMP Send "
        "completed with error (IB_TIMEOUT) -- dropping",
        {},
    ),
    (
        "pci.config_space_lost",
        "1c:00.0 VGA compatible controller: NVIDIA Corporation TU102GL [Quadro RTX 6000/8000] "
        "(rev ff)",
        {"pci": "1c:00.0"},
    ),
    (
        "k8s.gang_unschedulable",
        "  Warning  Unschedulable  18s (x12 over 29s)  volcano  1/1 tasks in gang unschedulable: "
        "pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable",
        {},
    ),
]


def match_of(signature: str, line: str) -> LogMatch:
    found = [m for m in classify_text(line, CATALOG).matches if m.signature == signature]
    assert found, f"{signature} did not match: {line!r}"
    return found[0]


@pytest.mark.parametrize(("signature", "line", "fields"), CASES)
def test_signature_matches_its_line_and_extracts_fields(
    signature: str, line: str, fields: dict[str, str]
) -> None:
    match = match_of(signature, line)
    assert match.fields.items() >= fields.items()
    assert match.line == line
    assert match.line_no == 1


def test_every_catalog_signature_has_a_case() -> None:
    assert set(CATALOG.names()) == {signature for signature, _, _ in CASES}


@pytest.mark.parametrize(
    "line",
    [
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
        "NCCL INFO comm 0x55d0 rank 3 nranks 16 cudaDev 3 busId 4b000 - Init COMPLETE",
        "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1a2b-3c4d-5e6f-123456789abc",
        "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build",
        "step 1200 loss=2.31 saved 3 files",
        "INFO 07-28 06:41:09 [api_server.py:1024] POST /v1/completions HTTP/1.1 200 OK",
    ],
)
def test_healthy_lines_match_nothing(line: str) -> None:
    assert classify_text(line, CATALOG).matches == ()


def test_fallen_off_bus_xid_line_is_not_counted_twice_as_the_no_xid_form() -> None:
    line = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus."
    assert [m.signature for m in classify_text(line, CATALOG).matches] == ["kernel.xid"]
