"""The tegrastats parser on every recorded real sample (JetPack 4 to 7, Nano/TX/Xavier/Orin modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.hardware.tegrastats import joules_per_inference, parse_line, parse_log, summarize

DATA = Path(__file__).parent / "data" / "experiment"

# file -> (ram used, ram total, cores, offline cores, gpu %, gpu MHz, total-power source, total mW, a temp)
CASES = {
    "tegrastats_agx_orin_32gb_jp6_r36_datadog.txt": (
        29114,
        30697,
        12,
        0,
        0,
        (305, 305),
        "sum of rails",
        3205 + 4405 + 4767,
        ("tj", 53.062),
    ),
    "tegrastats_agx_orin_64gb_jp5.txt": (
        1282,
        62795,
        12,
        0,
        0,
        (0,),
        "sum of rails",
        2399 + 400 + 4032 + 0 + 301 + 0,
        ("Tboard", 32.0),
    ),
    "tegrastats_agx_orin_64gb_jp6_datadog.txt": (
        2448,
        62840,
        12,
        0,
        0,
        (),
        "sum of rails",
        4940 + 988 + 4442,
        ("gpu", 37.75),
    ),
    "tegrastats_agx_orin_jp7_r39_jetson_stats.txt": (
        20642,
        62817,
        12,
        0,
        12,
        (1300, 1300),
        "sum of rails",
        5139 + 3268 + 5500,
        ("cpu", 52.968),
    ),
    "tegrastats_agx_xavier_datadog.txt": (
        721,
        31927,
        8,
        4,
        0,
        (318,),
        "sum of rails",
        0 + 311 + 932 + 0 + 621 + 1482,
        ("thermal", 36.9),
    ),
    "tegrastats_agx_xavier_jp42_gtop_pr7.txt": (
        14700,
        15692,
        8,
        0,
        0,
        (),
        "sum of rails",
        463 + 618 + 2936 + 0 + 309 + 3306,
        ("AUX", 30.5),
    ),
    "tegrastats_nano_4gb_l4t32_datadog.txt": (534, 3964, 4, 0, 0, (76,), "POM_5V_IN", 1022, ("AO", 39.5)),
    "tegrastats_orin_nano_8gb_jp6_beszel_a.txt": (
        6185,
        7620,
        6,
        0,
        63,
        (621,),
        "VDD_IN",
        12479,
        ("soc2", 52.437),
    ),
    "tegrastats_orin_nano_8gb_jp6_beszel_b.txt": (3452, 7620, 6, 0, 0, (), "VDD_IN", 4824, ("tj", 50.25)),
    "tegrastats_orin_nx_16gb_jp5_datadog.txt": (6334, 15388, 8, 4, 0, (611,), "VDD_IN", 5299, ("CV2", 45.75)),
    "tegrastats_tx1_datadog.txt": (1179, 3983, 4, 0, 0, (76,), "VDD_IN", 2532, ("Tdiode", 42.75)),
    "tegrastats_tx2_datadog.txt": (2344, 7852, 6, 2, 0, (624,), "VDD_IN", 3056, ("BCPU", 37.5)),
    "tegrastats_tx2_l4t32_beszel.txt": (3276, 7859, 6, 0, 0, (114,), "VDD_IN", 5297, ("PMIC", 50.0)),
    "tegrastats_xavier_nx_datadog.txt": (4412, 7772, 6, 0, 62, (306,), "VDD_IN", 4067, ("thermal", 42.55)),
}


def test_every_recorded_sample_is_covered():
    assert {p.name for p in DATA.glob("tegrastats_*.txt")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_recorded_sample(name):
    used, total, cores, offline, gpu_pct, gpu_mhz, source, total_mw, (temp_name, temp_c) = CASES[name]
    sample = parse_line((DATA / name).read_text())
    assert (sample.ram_used_mb, sample.ram_total_mb) == (used, total)
    assert len(sample.cpu_load_pct) == cores
    assert sum(1 for c in sample.cpu_load_pct if c is None) == offline
    assert sample.gpu_load_pct == gpu_pct
    assert sample.gpu_freq_mhz == gpu_mhz
    assert sample.total_power_source == source
    assert sample.total_power_mw == pytest.approx(total_mw)
    assert sample.temperatures_c[temp_name] == pytest.approx(temp_c)
    # -256 C means "no sensor"; RAM/SWAP/IRAM pairs are not power rails
    assert all(c > -100 for c in sample.temperatures_c.values())
    assert not {"RAM", "SWAP", "IRAM"} & set(sample.rails)


def test_jetpack7_three_value_rails_and_temperatures():
    sample = parse_line((DATA / "tegrastats_agx_orin_jp7_r39_jetson_stats.txt").read_text())
    rail = sample.rails["VDD_GPU_SOC"]
    assert (rail.current_mw, rail.average_mw, rail.max_mw) == (5139, 5139, 5139)
    assert sample.timestamp == "07-25-2026 09:08:28"
    assert sample.swap_used_mb is None  # JP7 prints no SWAP field here


def test_old_boards_without_mw_and_with_running_average():
    sample = parse_line((DATA / "tegrastats_tx1_datadog.txt").read_text())
    assert (sample.rails["VDD_CPU"].current_mw, sample.rails["VDD_CPU"].average_mw) == (76, 178)
    assert "GPU" in sample.temperatures_c and "VDD_GPU" in sample.rails


def test_unavailable_sensors_are_dropped():
    sample = parse_line((DATA / "tegrastats_agx_orin_64gb_jp5.txt").read_text())
    assert "GPU" not in sample.temperatures_c and "CV0" not in sample.temperatures_c


def test_log_skips_noise_and_summarizes():
    lines = [
        (DATA / "tegrastats_orin_nano_8gb_jp6_beszel_a.txt").read_text(),
        "",
        "tegrastats: some warning",
        (DATA / "tegrastats_orin_nano_8gb_jp6_beszel_b.txt").read_text(),
    ]
    samples = parse_log(lines)
    assert len(samples) == 2
    summary = summarize(samples)
    assert summary.mean_power_mw == pytest.approx((12479 + 4824) / 2)
    assert summary.power_source == "VDD_IN"
    assert summary.peak_ram_used_mb == 6185 and summary.ram_total_mb == 7620
    assert summary.mean_gpu_load_pct == pytest.approx(31.5)


def test_not_a_tegrastats_line():
    with pytest.raises(ValueError, match="no RAM field"):
        parse_line("NV Power Mode: MAXN")


@pytest.mark.parametrize(
    ("mw", "seconds", "count", "joules"),
    [(10000, 10, 1000, 0.1), (5000, 2, 100, 0.1), (12479, 1, 1, 12.479)],
)
def test_joules_per_inference(mw, seconds, count, joules):
    assert joules_per_inference(mw, seconds, count) == pytest.approx(joules)


def test_joules_needs_inferences():
    with pytest.raises(ValueError):
        joules_per_inference(1000, 1, 0)
