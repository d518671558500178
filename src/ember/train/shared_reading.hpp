// Shared reading for a job of several processes (data/key_exchange.hpp): the key exchange of a
// session's input pipelines, over a process channel of its own (distributed/process_channel.hpp),
// and the report of what each process's readers parsed.
#pragma once

#include <memory>

#include "ember/data/key_exchange.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/train/session_job.hpp"

namespace ember::train {

// The exchange for one pipeline of a job of several processes; null for a job of one process
// (which reads every row itself). Made by every process in the same order (it opens a channel:
// a collective call), once per pipeline.
std::shared_ptr<data::ProcessExchange> make_key_exchange(const SessionJob& job);

// Whether the ranks of `job` gather the keys of one-hot training batches themselves
// (data::PipelineOptions::ranks_gather_keys): in a job of several processes whose ranks are
// GPUs, or one host rank a process, unless EMBER_KEY_EXCHANGE (RuntimeOptions::key_exchange)
// keeps every key on the host exchange.
bool ranks_gather_keys(const SessionJob& job);

// Process 0 logs (info) what every process's readers parsed and passed over of `stats`,
// "input (training): process 0 parsed 2400 samples (... bytes) and passed over 2400; ...".
// A collective call in a job of several processes; nothing in a job of one.
void log_shared_reading(const SessionJob& job, const char* what, const data::PipelineStats& stats);

}  // namespace ember::train
