"""Classifying a log picks the layer with the strongest evidence, bottom-up.

Covers: XID 79 in both kernel formats (Xid line, and the multi-line fallen-off-the-bus message
with no Xid) -> gpu_hardware; XID 13 alone -> workload; XID 48 -> gpu_hardware; unknown XIDs
decide nothing; secondary XIDs (43, 45 `caused by previous Xid`, 154) never outrank a primary
one but decide when alone; NCCL IB status 12 (2.20 and 2.29 formats) -> fabric, status 4 ->
node_software; `NET/IB : No device found.` + `NET/Socket` -> kubernetes (TCP fallback), sockets
alone -> workload (job config); IB selected is context only; watchdog timeouts with progress
markers -> workload with the last completed work per rank, and `-1` -> kubernetes; fabric
evidence outranks the timeout it caused; CUDA errors through the watchdog take the CUDA
error's layer; device-plugin lines follow the XID table except Xid 69; OOMKilled ->
kubernetes; irrelevant text -> no layer and no matches; line numbers; a 10 MB log.
"""

from __future__ import annotations

from bot.diagnosis.logs import LogClassification, classify_text, load_log_catalog
from runbooks import LOG_SIGNATURES_FILE

CATALOG = load_log_catalog(LOG_SIGNATURES_FILE)


def classify(*lines: str) -> LogClassification:
    return classify_text("\n".join(lines), CATALOG)


# --- XIDs --------------------------------------------------------------------------------------


def test_xid_79_line_is_gpu_hardware() -> None:
    found = classify(
        "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1a2b-3c4d-5e6f-123456789abc",
        "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.",
    )
    assert (found.layer, found.signal, found.xids) == ("gpu_hardware", "kernel.xid", (79,))
    assert found.decided_by is not None and found.decided_by.line_no == 2
    assert found.decided_by.fields["pci"] == "0000:2b:00"


def test_multi_line_fallen_off_bus_without_xid_is_gpu_hardware_xid_79() -> None:
    # dmesg as quoted in NVIDIA/NVSentinel#155 (cited by DOMAIN §2): no Xid line at all.
    found = classify(
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "               NVRM: fallen off the bus and is not responding to commands.",
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).",
    )
    assert (found.layer, found.signal, found.xids) == (
        "gpu_hardware",
        "kernel.gpu_fallen_off_bus",
        (79,),
    )
    assert found.decided_by is not None
    assert found.decided_by.line_no == 3
    assert found.decided_by.fields == {"pci": "0000:b3:00.0"}  # from the first line


def test_single_line_fallen_off_bus_without_xid_is_gpu_hardware() -> None:
    found = classify(
        "NVRM: The NVIDIA GPU 0000:b3:00.0 … has fallen off the bus and is not responding "
        "to commands."
    )
    assert (found.layer, found.xids) == ("gpu_hardware", (79,))


def test_xid_13_alone_is_workload() -> None:
    found = classify(
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=2412, name=python, Graphics SM Warp Exception "
        "on (GPC 0, TPC 1, SM 0): Out Of Range Address"
    )
    assert (found.layer, found.xids) == ("workload", (13,))
    assert found.decided_by is not None and found.decided_by.fields["process"] == "python"


def test_xid_48_is_gpu_hardware_and_critical() -> None:
    found = classify(
        "NVRM: Xid (PCI:0000:b1:00): 48, pid=2296, name=python3, An uncorrectable "
        "double bit error (DBE) has been detected on GPU in the framebuffer"
    )
    assert found.layer == "gpu_hardware"
    assert found.decided_by is not None and found.decided_by.severity == "critical"
    assert "ROBUST_CHANNEL_GPU_ECC_DBE" in found.decided_by.meaning


def test_xid_48_outranks_the_application_xids_it_causes() -> None:
    found = classify(
        "NVRM: Xid (PCI:0000:b1:00): 13, pid=2296, name=python3, Graphics Exception",
        "NVRM: Xid (PCI:0000:b1:00): 48, pid=2296, name=python3, DBE detected",
        "NVRM: Xid (PCI:0000:b1:00): 43, pid=2296, name=python3, Ch 00000010",
    )
    assert (found.layer, found.xids) == ("gpu_hardware", (13, 43, 48))


def test_unknown_xid_decides_no_layer_but_is_listed() -> None:
    found = classify("NVRM: Xid (PCI:0000:3b:00): 999, something new")
    assert (found.layer, found.signal, found.xids) == (None, None, (999,))
    assert found.matches[0].meaning == "Xid 999 (UNKNOWN): unknown XID, see NVIDIA catalog"


def test_caused_by_previous_xid_does_not_outrank_the_primary_xid() -> None:
    found = classify(
        "NVRM: Xid (PCI:0000:1b:00): 45, pid=5120, name=python, Ch 00000010, "
        "caused by previous Xid 149",
        "NVRM: Xid (PCI:0000:1c:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6)",
    )
    assert (found.layer, found.xids) == ("fabric", (45, 149))
    assert found.decided_by is not None and found.decided_by.xid == 149
    assert found.matches[0].secondary


def test_secondary_xid_never_outranks_a_primary_even_when_more_severe() -> None:
    # Xid 154 (recovery action) is critical but follows the XID it links to (here 31).
    found = classify(
        "NVRM: Xid (PCI:0000:01:00): 31, pid=13705, name=python, channel 0x0000000c, "
        "MMU Fault: ENGINE GRAPHICS",
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) "
        "to 0x2 (Node Reboot Required)",
    )
    assert found.layer == "workload"
    assert found.decided_by is not None and found.decided_by.xid == 31
    assert found.matches[1].fields["recovery_action"] == "Node Reboot Required"


def test_secondary_xid_alone_still_decides() -> None:
    found = classify("NVRM: Xid (PCI:0000:01:00): 43, pid=7, name=python, Ch 00000008")
    assert (found.layer, found.signal) == ("workload", "kernel.xid")


# --- NCCL IB and transport ----------------------------------------------------------------------


def test_ib_status_12_in_the_2_20_format_is_fabric() -> None:
    found = classify(
        "NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv) localGid fd00:… remoteGidsfd00:…"
    )
    assert (found.layer, found.signal) == ("fabric", "nccl.ib.completion_error")
    assert found.decided_by is not None
    assert found.decided_by.fields["peer"] == "10.216.210.236<54862>"
    assert "RETRY_EXC_ERR" in found.decided_by.meaning


def test_ib_status_12_in_the_2_29_format_is_fabric() -> None:
    found = classify(
        "NCCL WARN NET/IB: Got completion from peer 10.0.0.7<40212> with "
        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 (Send) "
        "hca mlx5_0",
        "NCCL WARN HINT: In many cases this error occurs when the NCCL_IB_TIMEOUT is set "
        "too short.",
        "NCCL WARN HINT: Default value is 20, which is ~30 seconds before error.",
    )
    assert (found.layer, found.signal) == ("fabric", "nccl.ib.completion_error")
    assert found.decided_by is not None
    assert found.decided_by.fields["status"] == "12"
    assert found.decided_by.fields["hca"] == "mlx5_0"


def test_ib_status_4_is_node_software_acs() -> None:
    found = classify(
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.9<33211> with status=4 opcode=0 "
        "len=0 vendor err 81 (Send)",
        "HINT: In many cases this error occurs when ACS is enabled which would break GPU "
        "Direct RDMA protocol.",
    )
    assert (found.layer, found.signal) == ("node_software", "nccl.ib.completion_error")
    assert found.decided_by is not None and "ACS" in found.decided_by.meaning


def test_ib_flush_error_is_secondary_context() -> None:
    found = classify(
        "NET/IB : Got completion from peer 10.0.0.9<1> with status=5 opcode=0 len=0 vendor "
        "err 249 (Recv)"
    )
    assert found.layer is None and found.matches[0].secondary


def test_tcp_fallback_without_an_ib_device_is_kubernetes() -> None:
    found = classify(
        "gpu-node-03:1234:1300 [0] NCCL INFO NET/IB : No device found.",
        "gpu-node-03:1234:1300 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>",
        "gpu-node-03:1234:1300 [0] NCCL INFO Using network Socket",
        "gpu-node-03:1234:1301 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
    )
    assert (found.layer, found.signal) == ("kubernetes", "nccl.ib.no_device")
    assert {m.signature for m in found.matches} == {"nccl.ib.no_device", "nccl.net.socket_fallback"}


def test_sockets_with_ib_devices_present_is_the_jobs_nccl_config() -> None:
    found = classify(
        "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>",
        "NCCL INFO Using network Socket",
    )
    assert (found.layer, found.signal) == ("workload", "nccl.net.socket_fallback")


def test_ib_selected_is_context_only() -> None:
    found = classify(
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ibs65:10.10.10.101<0>",
        "NCCL INFO Using network IB",
    )
    assert found.layer is None and len(found.matches) == 2


def test_port_error_outranks_the_timeout_it_causes() -> None:
    found = classify(
        "[E ProcessGroupNCCL.cpp:458] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800123 "
        "milliseconds before timing out.",
        "NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)",
    )
    assert (found.layer, found.signal) == ("fabric", "nccl.ib.async_port_error")


# --- PyTorch watchdog ---------------------------------------------------------------------------


def test_watchdog_timeout_with_progress_markers_is_workload_with_last_completed_work() -> None:
    found = classify(
        "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
        "[rank0]:[E1218 20:27:21.427] [PG 1 Rank 0] Exception (either an error or timeout) "
        "detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed "
        "NCCL work: 1579.",
        "[rank1]:[E1218 20:27:22.001] [PG 1 Rank 1] Timeout at NCCL work: 1580, last enqueued "
        "NCCL work: 1580, last completed NCCL work: 1577.",
    )
    assert (found.layer, found.signal) == ("workload", "torch.nccl.watchdog_timeout")
    timeout = found.matches[0]
    assert (timeout.fields["seqnum"], timeout.fields["optype"]) == ("1580", "ALLREDUCE")
    assert timeout.fields["timeout_ms"] == "600000"
    markers = {
        m.fields["rank"]: m.fields["last_completed"]
        for m in found.matches
        if m.signature == "torch.nccl.progress_marker"
    }
    assert markers == {"0": "1579", "1": "1577"}


def test_first_collective_never_completed_is_kubernetes() -> None:
    found = classify(
        "[PG 0 Rank 5] Exception (either an error or timeout) detected by watchdog at work: 1, "
        "last enqueued NCCL work: -1, last completed NCCL work: -1."
    )
    assert found.layer == "kubernetes"


def test_cuda_ecc_error_through_the_watchdog_is_gpu_hardware() -> None:
    found = classify(
        "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with "
        "exception: CUDA error: uncorrectable ECC error encountered",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    )
    assert (found.layer, found.signal) == ("gpu_hardware", "cuda.uncorrectable_ecc")


def test_illegal_memory_access_through_the_watchdog_is_decided_by_the_cuda_error() -> None:
    found = classify(
        "[PG ID 2 PG GUID 3 Rank 0] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered"
    )
    assert (found.layer, found.signal) == ("workload", "cuda.illegal_memory_access")


def test_sigkill_of_a_worker_points_at_the_memory_limit() -> None:
    found = classify(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
        "local_rank: 0 (pid: 218624) of binary: /usr/bin/python"
    )
    assert found.layer == "kubernetes"


# --- Kubernetes, device plugin, telemetry -------------------------------------------------------


def test_oom_killed_is_kubernetes() -> None:
    found = classify(
        "State:          Running",
        "Last State:     Terminated",
        "  Reason:       OOMKilled",
        "  Exit Code:    137",
    )
    assert (found.layer, found.signal) == ("kubernetes", "k8s.oom_killed")
    assert found.decided_by is not None and found.decided_by.line_no == 3


def test_device_plugin_follows_the_xid_table_except_for_xid_69() -> None:
    dbe = classify("XidCriticalError: Xid=48 on Device=GPU-…; marking device as unhealthy.")
    app = classify("XidCriticalError: Xid=69 on Device=GPU-…, the device will go unhealthy.")
    assert (dbe.layer, dbe.xids) == ("gpu_hardware", (48,))
    assert (app.layer, app.xids) == ("kubernetes", (69,))


def test_dcp_not_collecting_is_telemetry() -> None:
    found = classify(
        "Not collecting DCP metrics: This request is serviced by a module of DCGM that is not "
        "currently loaded",
        "Skipping line 21 ('DCGM_FI_PROF_PIPE_TENSOR_ACTIVE'): metric not enabled",
    )
    assert (found.layer, found.signal) == ("telemetry", "exporter.dcgm_dcp_not_collecting")


# --- nothing relevant, line handling, size ------------------------------------------------------


def test_text_with_nothing_relevant_has_no_layer_and_no_matches() -> None:
    found = classify(
        "[2024-05-01 12:00:01] INFO step 1234 loss=2.345 lr=3e-4 tokens/s=123456",
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
        'INFO:     127.0.0.1:54321 - "POST /v1/completions HTTP/1.1" 200 OK',
    )
    assert found == LogClassification(matches=())
    assert classify_text("", CATALOG) == LogClassification(matches=())


def test_context_lines_alone_decide_nothing() -> None:
    found = classify(
        "Saving model checkpoint to /out/checkpoint-500",
        "INFO 07-28 06:40:59 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 239.2 tokens/s, Running: 8 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 91.2%, Prefix cache hit rate: 0.0%",
    )
    assert found.layer is None and len(found.matches) == 2


def test_line_numbers_are_one_based_and_crlf_is_stripped() -> None:
    text = "boot\r\nok\r\nNVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\r\nend"
    (match,) = classify_text(text, CATALOG).matches
    assert match.line_no == 3
    assert match.line == "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus."


def test_a_10_mb_log_finds_the_one_xid_line() -> None:
    noise = [
        "[2024-05-01 12:00:01] INFO step 1234 loss=2.345 lr=3e-4 tokens/s=123456",
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
        "Jan 01 00:00:00 host kernel: eth0: Link is Up - 100Gbps/Full - flow control off",
    ]
    lines = noise * 50_000
    lines[123_457] = "NVRM: Xid (PCI:0000:44:00): 48, pid=1, name=python, DBE"
    found = classify(*lines)
    assert sum(len(line) + 1 for line in lines) > 10_000_000
    assert (found.layer, found.xids) == ("gpu_hardware", (48,))
    assert found.decided_by is not None and found.decided_by.line_no == 123_458


# --- XID chains, NVLink5 Fatal/Nonfatal, consequences of a lost GPU (issue 14) -------------------


def test_a_chain_line_alone_is_attributed_to_the_earlier_xid() -> None:
    # The Xid 149 line scrolled out of the pasted log; the Xid 45 chain still names it.
    found = classify(
        "NVRM: Xid (PCI:0000:1b:00): 45, pid=5120, name=python, Ch 00000010, "
        "caused by previous Xid 149"
    )
    assert (found.layer, found.xids) == ("fabric", (45, 149))
    assert found.decided_by is not None and found.decided_by.caused_by == 149
    assert "caused by previous Xid 149 (NVLINK_NETIR_ERROR)" in found.decided_by.meaning


def test_a_nonfatal_nvlink5_xid_is_a_warning_and_a_fatal_one_critical() -> None:
    nonfatal = classify("NVRM: Xid (PCI:0000:1c:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 04")
    fatal = classify("NVRM: Xid (PCI:0000:1c:00): 145, RLW_REMAP Fatal XC0 i0 Link 04")
    assert [m.severity for m in nonfatal.matches] == ["warning"]
    assert [m.severity for m in fatal.matches] == ["critical"]
    assert nonfatal.layer == fatal.layer == "fabric"


def test_xid_79_with_nccl_retry_errors_is_the_gpu_not_the_fabric() -> None:
    found = classify(
        "NCCL WARN NET/IB : Got completion from peer 10.0.3.7<40212> with status=12 opcode=0 "
        "len=0 vendor err 129 (Recv)",
        "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        "HINT: In many cases this error occurs when the NCCL_IB_TIMEOUT is set too short.",
    )
    assert found.layer == "gpu_hardware"
    assert found.decided_by is not None and found.decided_by.xid == 79
    assert [m.secondary for m in found.matches] == [True, False, True]


def test_nccl_retry_errors_without_a_lost_gpu_stay_fabric() -> None:
    found = classify(
        "NCCL WARN NET/IB : Got completion from peer 10.0.3.7<40212> with status=12 opcode=0 "
        "len=0 vendor err 129 (Recv)"
    )
    assert found.layer == "fabric"


def test_mlx5_cable_error_and_link_down_are_fabric() -> None:
    found = classify(
        "mlx5_core 0000:9a:00.0: Port module event[error]: module 0, Cable error, "
        "Bad or shorted cable/module",
        "mlx5_core 0000:9a:00.0 ibp154s0: Link down",
    )
    assert (found.layer, found.signal) == ("fabric", "kernel.mlx5_cable_error")


def test_gsp_rpc_timeout_names_the_gpu_index() -> None:
    found = classify(
        "NVRM: GPU6 _kgspLogRpcTimeout: ****************** GSP Timeout ******************"
    )
    assert (found.layer, found.signal) == ("node_software", "kernel.gsp_timeout")
    assert found.matches[0].fields["gpu_index"] == "6"
