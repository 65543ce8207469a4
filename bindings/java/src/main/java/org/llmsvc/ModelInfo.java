// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/** The service's model and its readiness, as {@code llmsvc_model_info_get} describes them. */
public final class ModelInfo {
  /** The tensors of one weight type in the model file. */
  public static final class WeightType {
    private final String name;
    private final int tensors;
    private final long bytes;

    WeightType(String name, int tensors, long bytes) {
      this.name = name;
      this.tensors = tensors;
      this.bytes = bytes;
    }

    /** The GGUF type name, e.g. "Q4_1". */
    public String name() {
      return name;
    }

    public int tensors() {
      return tensors;
    }

    public long bytes() {
      return bytes;
    }

    @Override
    public String toString() {
      return name + " x" + tensors;
    }
  }

  private final int[] ints;
  private final long[] longs;
  private final String[] strings;
  private final List<WeightType> weightTypes;

  ModelInfo(int[] ints, long[] longs, String[] strings, List<WeightType> weightTypes) {
    this.ints = ints.clone();
    this.longs = longs.clone();
    this.strings = strings.clone();
    this.weightTypes = Collections.unmodifiableList(weightTypes);
  }

  /** A model is loaded and calls are served. */
  public boolean ready() {
    return ints[Native.MODEL_READY] != 0;
  }

  /** GGUF general.architecture, e.g. "llama". */
  public String architecture() {
    return strings[Native.MODEL_ARCHITECTURE];
  }

  /** GGUF general.name ("" when the file has none). */
  public String name() {
    return strings[Native.MODEL_NAME];
  }

  public long parameters() {
    return longs[Native.MODEL_N_PARAMS];
  }

  /** The context length the model was trained with. */
  public int trainedContextLength() {
    return ints[Native.MODEL_N_CTX_TRAIN];
  }

  /** Tokens one context holds on this service. */
  public int contextLength() {
    return ints[Native.MODEL_N_CTX];
  }

  public int vocabularySize() {
    return ints[Native.MODEL_N_VOCAB];
  }

  public int layers() {
    return ints[Native.MODEL_N_LAYER];
  }

  public long weightBytes() {
    return longs[Native.MODEL_WEIGHT_BYTES];
  }

  /** By bytes, the dominant type first. */
  public List<WeightType> weightTypes() {
    return weightTypes;
  }

  public boolean hasChatTemplate() {
    return ints[Native.MODEL_HAS_CHAT_TEMPLATE] != 0;
  }

  /** Beginning of sequence: its id (-1: none). */
  public int bosToken() {
    return ints[Native.MODEL_BOS];
  }

  public String bosText() {
    return strings[Native.MODEL_BOS_TEXT];
  }

  /** End of sequence: its id (-1: none). */
  public int eosToken() {
    return ints[Native.MODEL_EOS];
  }

  public String eosText() {
    return strings[Native.MODEL_EOS_TEXT];
  }

  /** End of turn: its id (-1: none). */
  public int eotToken() {
    return ints[Native.MODEL_EOT];
  }

  public String eotText() {
    return strings[Native.MODEL_EOT_TEXT];
  }

  /** The devices the model runs on, in order of preference (the weights load on the first). */
  public List<String> devices() {
    String d = strings[Native.MODEL_DEVICES];
    return d.isEmpty() ? Collections.emptyList() : Arrays.asList(d.split(","));
  }

  @Override
  public String toString() {
    return "ModelInfo{" + architecture() + " '" + name() + "', " + parameters() + " parameters, n_ctx "
        + contextLength() + "/" + trainedContextLength() + ", " + weightTypes + "}";
  }
}
