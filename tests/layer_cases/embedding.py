"""Cases for the embedding family."""

from tests.layer_cases import case, keras3

CASES = [
    case("Embedding", 1000, 64, input=[None, 10]),
    case("Embedding", input_dim=50, output_dim=8, input=[None, None]),
    case("Embedding", 20, 4, input=[None]),
    case("Embedding", 20, 4, input=[None, 3, 5]),
    case("Embedding", 20, 4, input=[32, 7]),
    case("Embedding", 10000, 128, mask_zero=True, input=[None, 100]),
    case("Embedding", 100, 16, trainable=False, input=[None, 12]),
    case("Embedding", 100, 16, lora_rank=4, input=[None, 12]),
    case("Embedding", 5000, 32, input_length=20, input=[None, 20]),
    case("Embedding", 5000, 32, input_length=20, input=[None, None]),
    case("Embedding", 0, 8, input=[None, 10]),
    case("Embedding", 10, 0, input=[None, 10]),
    case("Embedding", 10, -3, input=[None, 10]),
    case("Embedding", 10.5, 8, input=[None, 10]),
    case("Embedding", 10, input=[None, 10]),
    # Keras 1/2 spellings
    case("Embedding", 1000, 64, input_length=10, input=[None, 10],
         twin=keras3("Embedding", 1000, 64)),
    case("Embedding", input_dim=300, output_dim=50, input_length=40, mask_zero=True,
         init="uniform", W_regularizer=None, input=[None, 40],
         twin=keras3("Embedding", 300, 50, mask_zero=True)),
    case("Embedding", 300, 50, embeddings_initializer="uniform", input_length=12,
         input=[None, 12], twin=keras3("Embedding", 300, 50)),
]
