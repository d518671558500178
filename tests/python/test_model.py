"""ember.Model, built as with HugeCTR's Python API, writes the configuration a person would write
by hand (tests/reference/dlrm_small.json), and it trains the same from Python and the CLI."""

import json

import pytest

import ember
from conftest import CONFIG, cli_set, metrics_losses, run_cli


def dlrm_small():
    solver = ember.CreateSolver(lr_policy="fixed", display=1, max_iter=200, batchsize=512,
                                batchsize_eval=512, snapshot=0, eval_interval=0,
                                i64_input_key=False, seed=11)
    reader = ember.DataReaderParams(data_reader_type=ember.DataReaderType_t.Norm,
                                    source=["./reference-data/train.txt"],
                                    check_type=ember.Check_t.Sum, num_workers=1)
    optimizer = ember.CreateOptimizer(optimizer_type=ember.Optimizer_t.SGD,
                                      update_type=ember.Update_t.Local, learning_rate=0.1)
    model = ember.Model(solver, reader, optimizer)
    model.add(ember.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                          data_reader_sparse_param_array=[
                              ember.DataReaderSparseParam("data1", 1, False, 26)]))
    model.add(ember.SparseEmbedding(
        embedding_type=ember.Embedding_t.LocalizedSlotSparseEmbeddingHash, embedding_vec_size=16,
        combiner="sum", sparse_embedding_name="sparse_embedding1", bottom_name="data1",
        slot_size_array=[400] * 26))
    fused = ember.Layer_t.FusedInnerProduct
    model.add(ember.DenseLayer(layer_type=fused, bottom_names=["dense"], top_names=["fc1"],
                               num_output=64))
    model.add(ember.DenseLayer(layer_type=fused, bottom_names=["fc1"], top_names=["fc2"],
                               num_output=16))
    model.add(ember.DenseLayer(layer_type=ember.Layer_t.Interaction,
                               bottom_names=["fc2", "sparse_embedding1"],
                               top_names=["interaction1"]))
    model.add(ember.DenseLayer(layer_type=fused, bottom_names=["interaction1"],
                               top_names=["fc3"], num_output=64))
    model.add(ember.DenseLayer(layer_type=fused, bottom_names=["fc3"], top_names=["fc4"],
                               num_output=32))
    model.add(ember.DenseLayer(layer_type=ember.Layer_t.InnerProduct, bottom_names=["fc4"],
                               top_names=["fc5"], num_output=1))
    model.add(ember.DenseLayer(layer_type=ember.Layer_t.BinaryCrossEntropyLoss,
                               bottom_names=["fc5", "label"], top_names=["loss"]))
    return model


def test_the_built_model_is_the_hand_written_json():
    with open(CONFIG) as f:
        by_hand = json.load(f)
    model = dlrm_small().compile()
    assert model.to_json() == by_hand
    assert json.loads(ember.check_config(json.dumps(model.to_json()))) == \
        json.loads(ember.load_config(CONFIG))


def test_graph_to_json_trains_the_same_from_the_cli(ember_exe, settings, tmp_path):
    model = dlrm_small()
    model.graph_to_json(tmp_path / "built.json")
    run_cli(ember_exe, "train", str(tmp_path / "built.json"), "--no-progress", "--run-dir",
            str(tmp_path / "built"), *cli_set(settings))
    run_cli(ember_exe, "train", CONFIG, "--no-progress", "--run-dir", str(tmp_path / "hand"),
            *cli_set(settings))
    built = metrics_losses(tmp_path / "built" / "metrics.csv")
    assert built == metrics_losses(tmp_path / "hand" / "metrics.csv")
    assert len(built) == settings["solver.max_iter"]
    # and the model object itself trains to the same losses in Python
    s = dlrm_small().session(set=settings, quiet=True)
    result = s.fit()
    assert dict(result["losses"]) == pytest.approx(built, rel=2e-8)
    # one rate per display window, as the display lines print them; a CPU run copies no batch
    assert len(result["rates"]) == len(result["losses"])
    assert all(rate > 0 for rate in result["rates"])
    assert result["late_device_slots"] == 0


def test_fit_takes_hugectr_arguments(settings, capsys):
    data = {k: v for k, v in settings.items() if k.startswith("layers.")}
    s = dlrm_small().fit(max_iter=4, display=2, eval_interval=4, set=data, device="cpu")
    assert s.iteration == 4
    out = capsys.readouterr().out
    assert "iter=2 " in out and "iter=4 " in out and "iter=3 " not in out
    assert "eval iter=4 AUC=" in out


def test_summary_lists_the_layers(capsys):
    dlrm_small().summary()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["layer", "type", "bottom", "top"]
    assert lines[1].split()[:2] == ["data", "Data"]
    assert lines[-1].split() == ["loss", "BinaryCrossEntropyLoss", "fc5,", "label", "loss"]


def test_compile_reports_the_cli_readers_message():
    model = dlrm_small()
    model.dense[1].bottom = ["nowhere"]
    with pytest.raises(ember.ConfigError, match="layer 'fc2'.*'nowhere'"):
        model.compile()
    with pytest.raises(TypeError):
        dlrm_small().add("not a layer")


def test_hugectr_keywords_map_to_json_blocks():
    layer = ember.DenseLayer(layer_type=ember.Layer_t.InnerProduct, bottom_names=["a"],
                             top_names=["b"], num_output=8, weight_init_type="XavierUniform",
                             bias_init_type="Zero")
    assert layer.to_json(0) == {"name": "b", "type": "InnerProduct", "bottom": "a", "top": "b",
                                "fc_param": {"num_output": 8, "weight_init": "XavierUniform",
                                             "bias_init": "Zero"}}
    drop = ember.DenseLayer(layer_type="Dropout", bottom_names="a", top_names="b",
                            dropout_rate=0.5)
    assert drop.to_json(0)["rate"] == 0.5
    solver = ember.CreateSolver(vvgpu=[[0, 1]], i64_input_key=True, use_mixed_precision=True,
                                scaler=512, metrics_spec={"AUC": 0.8025}, lr=0.01,
                                warmup_steps=8, max_iter=10)
    assert solver.solver == {"gpu": [0, 1], "input_key_type": "I64", "mixed_precision": 512,
                             "eval_metrics": ["AUC:0.8025"], "max_iter": 10}
    adam = ember.CreateOptimizer(optimizer_type="Adam", beta1=0.9)
    assert adam.to_json(solver.schedule) == {
        "type": "Adam", "adam_hparam": {"beta1": 0.9, "learning_rate": 0.01, "warmup_steps": 8}}


def test_hybrid_embedding_param_fills_the_hparam_keys():
    common = dict(embedding_type=ember.Embedding_t.HybridSparseEmbedding, embedding_vec_size=16,
                  sparse_embedding_name="e", bottom_name="d", slot_size_array=[10, 20])
    older = ember.HybridEmbeddingParam(2, -1, 0.01, 1.3e11, 1.9e11, 1.0,
                                       ember.CommunicationType.IB_NVLink_Hier,
                                       ember.HybridEmbeddingType.Distributed)
    newer = ember.HybridEmbeddingParam(2, -1, 0.01, 1.3e11, 1.9e11, 1.0, False, False,
                                       ember.CommunicationType.NVLink_SingleNode,
                                       ember.HybridEmbeddingType.Distributed)
    hparam = ember.SparseEmbedding(hybrid_embedding_param=older, **common).to_json()[
        "sparse_embedding_hparam"]
    assert hparam["max_num_frequent_categories"] == 2
    assert hparam["communication_type"] == "IB_NVLink_Hierarchical"
    assert hparam["hybrid_embedding_type"] == "Distributed"
    newer_hparam = ember.SparseEmbedding(hybrid_embedding_param=newer, **common).to_json()[
        "sparse_embedding_hparam"]
    assert newer_hparam["use_train_precompute_indices"] is False
    assert newer_hparam["communication_type"] == "NVLink_SingleNode"
    # The C++ reader takes the layer as HugeCTR's keys.
    layer = ember.SparseEmbedding(hybrid_embedding_param=newer, **common).to_json()
    assert layer["type"] == "HybridSparseEmbedding"
    with pytest.raises(TypeError):
        ember.HybridEmbeddingParam(2, bogus=1)
    # Ember's frequent_rule, by keyword beside HugeCTR's arguments.
    traffic = ember.HybridEmbeddingParam(2, -1, 0.01, frequent_rule="traffic")
    traffic_hparam = ember.SparseEmbedding(hybrid_embedding_param=traffic, **common).to_json()[
        "sparse_embedding_hparam"]
    assert traffic_hparam["frequent_rule"] == "traffic"
    assert traffic_hparam["p_dup_max"] == 0.01
