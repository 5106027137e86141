"""The name table of a keras-hub `AlbertBackbone`: each weight under its TF1 name, one correspondence that the
keras-hub reader (`keras_hub_format`) reads with and the preset writer (`keras_hub_writer`) assigns with."""

from albert_tf.checkpoints.name_table import Entry, block_entries


def backbone_entries(backbone):
    """One `Entry` per weight of a keras-hub `AlbertBackbone`, under its TF1 name: the correspondence both ways
    (`backbone_arrays` reads with it, `keras_hub_writer` assigns with it)."""
    def entry(name, variable):
        return Entry(name, variable, tuple(variable.shape))

    entries = [
        entry("bert/embeddings/word_embeddings", backbone.token_embedding.embeddings),
        entry("bert/embeddings/position_embeddings", backbone.position_embedding.position_embeddings),
        entry("bert/embeddings/token_type_embeddings", backbone.segment_embedding.embeddings),
    ]
    norm = backbone.get_layer("embeddings_layer_norm")
    entries += [entry("bert/embeddings/LayerNorm/gamma", norm.gamma),
                entry("bert/embeddings/LayerNorm/beta", norm.beta)]
    projection = backbone.get_layer("embedding_projection")
    entries += [entry("bert/encoder/embedding_hidden_mapping_in/kernel", projection.kernel),
                entry("bert/encoder/embedding_hidden_mapping_in/bias", projection.bias)]
    c = backbone.get_config()
    for g in range(c["num_groups"]):
        for i in range(c["num_inner_repetitions"]):
            block = backbone.get_layer(f"group_{g}_inner_layer_{i}")
            entries += block_entries(f"bert/encoder/transformer/group_{g}/inner_group_{i}", block)
    pooler = backbone.get_layer("pooled_dense")
    entries += [entry("bert/pooler/dense/kernel", pooler.kernel), entry("bert/pooler/dense/bias", pooler.bias)]
    return entries


def backbone_arrays(backbone):
    """{TF1 name: array} of a keras-hub `AlbertBackbone`."""
    return {e.name: e.to_tf1(e.variable.numpy()) for e in backbone_entries(backbone)}
