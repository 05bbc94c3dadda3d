"""`nvidia-smi -q -x`: the old DTD's element names, looped documents, truncation, and hostile XML.

The old-DTD document uses the element names of formats.md §3.5 (telegraf#12996, netdata#10362,
CPU-X#115 pastes): `clocks_throttle_reasons`, `power_readings`, pre-Ampere ECC, `remapped_rows` N/A.
"""

from __future__ import annotations

import datetime as dt

from tests.helpers import gpu_tables

UTC = dt.timezone.utc


def _doc(stamp: str, used: str, thermal: str, dbe: str, pending: str) -> str:
    return f"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10.dtd">
<nvidia_smi_log>
	<timestamp>{stamp}</timestamp>
	<driver_version>430.64</driver_version>
	<cuda_version>10.1</cuda_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:29:00.0">
		<product_name>GeForce GTX 1660 Ti</product_name>
		<uuid>GPU-e189fb8d-1627-f8f0-2ba3-c0585a8e9e85</uuid>
		<minor_number>0</minor_number>
		<fan_speed>41 %</fan_speed>
		<performance_state>P2</performance_state>
		<clocks_throttle_reasons>
			<clocks_throttle_reason_gpu_idle>Not Active</clocks_throttle_reason_gpu_idle>
			<clocks_throttle_reason_applications_clocks_setting>Not Active</clocks_throttle_reason_applications_clocks_setting>
			<clocks_throttle_reason_sw_power_cap>Not Active</clocks_throttle_reason_sw_power_cap>
			<clocks_throttle_reason_hw_slowdown>Not Active</clocks_throttle_reason_hw_slowdown>
			<clocks_throttle_reason_hw_thermal_slowdown>{thermal}</clocks_throttle_reason_hw_thermal_slowdown>
			<clocks_throttle_reason_hw_power_brake_slowdown>Not Active</clocks_throttle_reason_hw_power_brake_slowdown>
			<clocks_throttle_reason_sync_boost>Not Active</clocks_throttle_reason_sync_boost>
			<clocks_throttle_reason_sw_thermal_slowdown>Not Active</clocks_throttle_reason_sw_thermal_slowdown>
			<clocks_throttle_reason_display_clocks_setting>Not Active</clocks_throttle_reason_display_clocks_setting>
		</clocks_throttle_reasons>
		<fb_memory_usage>
			<total>5944 MiB</total>
			<used>{used}</used>
			<free>5000 MiB</free>
		</fb_memory_usage>
		<compute_mode>Default</compute_mode>
		<utilization>
			<gpu_util>88 %</gpu_util>
			<memory_util>40 %</memory_util>
		</utilization>
		<ecc_errors>
			<volatile>
				<single_bit>
					<device_memory>0</device_memory>
					<total>5</total>
				</single_bit>
				<double_bit>
					<device_memory>0</device_memory>
					<total>{dbe}</total>
				</double_bit>
			</volatile>
		</ecc_errors>
		<retired_pages>
			<multiple_single_bit_retirement>
				<retired_count>0</retired_count>
				<retired_pagelist>
				</retired_pagelist>
			</multiple_single_bit_retirement>
			<double_bit_retirement>
				<retired_count>1</retired_count>
				<retired_pagelist>
				</retired_pagelist>
			</double_bit_retirement>
			<pending_blacklist>{pending}</pending_blacklist>
		</retired_pages>
		<remapped_rows>N/A</remapped_rows>
		<temperature>
			<gpu_temp>71 C</gpu_temp>
			<gpu_temp_max_threshold>96 C</gpu_temp_max_threshold>
			<gpu_temp_slow_threshold>93 C</gpu_temp_slow_threshold>
		</temperature>
		<power_readings>
			<power_state>P2</power_state>
			<power_management>Supported</power_management>
			<power_draw>118.02 W</power_draw>
			<power_limit>120.00 W</power_limit>
			<default_power_limit>120.00 W</default_power_limit>
			<enforced_power_limit>120.00 W</enforced_power_limit>
		</power_readings>
		<clocks>
			<graphics_clock>1875 MHz</graphics_clock>
			<sm_clock>1875 MHz</sm_clock>
			<mem_clock>5750 MHz</mem_clock>
		</clocks>
		<processes>
			<process_info>
				<pid>4242</pid>
				<type>C</type>
				<process_name>python</process_name>
				<used_memory>900 MiB</used_memory>
			</process_info>
		</processes>
	</gpu>

</nvidia_smi_log>
"""


def test_old_dtd_and_looped_documents(tmp_path):
    a = _doc("Sun Dec  1 15:30:44 2019", "944 MiB", "Not Active", "0", "No")
    b = _doc("Sun Dec  1 15:30:49 2019", "950 MiB", "Active", "3", "Yes")
    f, gpu, procs = gpu_tables(tmp_path, a + b, "smi.xml")
    assert (f["kind"], f["status"]) == ("nvsmi_xml", "parsed")
    rows = gpu.sort("seq").to_dicts()
    assert [(r["seq"], r["line"]) for r in rows] == [(0, 8), (1, a.count("\n") + 8)]
    assert [r["ts"] for r in rows] == [dt.datetime(2019, 12, 1, 15, 30, 44, tzinfo=UTC), dt.datetime(2019, 12, 1, 15, 30, 49, tzinfo=UTC)]
    r0, r1 = rows
    assert (r0["name"], r0["fan_pct"], r0["pstate"], r0["utilization_gpu_pct"], r0["utilization_mem_pct"]) == (
        "GeForce GTX 1660 Ti", 41.0, "P2", 88.0, 40.0)
    assert (r0["power_w"], r0["power_limit_w"], r0["temperature_c"], r0["sm_clock_mhz"], r0["mem_clock_mhz"]) == (
        118.02, 120.0, 71.0, 1875.0, 5750.0)
    assert (r0["throttle_mask"], r1["throttle_mask"], r1["throttle_reasons"]) == (0, 0x40, "hw_thermal_slowdown")
    assert (r0["ecc_corrected_volatile"], r0["ecc_uncorrected_volatile"], r1["ecc_uncorrected_volatile"]) == (5, 0, 3)
    assert (r0["retired_pages_dbe"], r0["retired_pages_pending"], r1["retired_pages_pending"]) == (1, False, True)
    assert r0["remapped_rows_pending"] is None and r1["memory_used_mib"] == 950.0
    assert procs.sort("seq").select("seq", "gpu", "pid", "type", "process", "used_memory_mib").rows() == [
        (0, 0, 4242, "C", "python", 900.0), (1, 0, 4242, "C", "python", 900.0)]


def test_cut_off_last_document_is_partial(tmp_path):
    a = _doc("Sun Dec  1 15:30:44 2019", "944 MiB", "Not Active", "0", "No")
    f, gpu, _ = gpu_tables(tmp_path, a + a[: len(a) // 2], "smi.xml")
    assert f["status"] == "partial" and "incomplete" in f["error"]
    assert gpu.height == 1


def test_entity_declarations_are_refused(tmp_path):
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a "aaaaaaaaaa">\n'
            '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">\n]>\n'
            "<nvidia_smi_log><timestamp>&c;</timestamp><gpu id=\"00000000:01:00.0\"><product_name>x</product_name></gpu></nvidia_smi_log>\n")
    f, gpu, _ = gpu_tables(tmp_path, bomb, "smi.xml")
    assert (f["kind"], f["status"]) == ("nvsmi_xml", "failed")
    assert "entities" in f["error"] and gpu.height == 0
    external = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
                "<nvidia_smi_log><gpu id=\"00000000:01:00.0\"><product_name>&x;</product_name></gpu></nvidia_smi_log>\n")
    f2, gpu2, _ = gpu_tables(tmp_path / "b", external, "smi.xml")
    assert f2["status"] == "failed" and gpu2.height == 0


def test_undefined_entity_is_a_parse_error_not_an_expansion(tmp_path):
    doc = _doc("Sun Dec  1 15:30:44 2019", "944 MiB", "Not Active", "0", "No").replace("GeForce GTX 1660 Ti", "&foo;")
    f, gpu, _ = gpu_tables(tmp_path, doc, "smi.xml")
    assert f["status"] == "failed" and "malformed" in f["error"] and gpu.height == 0
