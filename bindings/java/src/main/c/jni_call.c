// SPDX-License-Identifier: Apache-2.0
/*
 * jni_call.c — org.llmsvc.Native.call: one llmsvc_call (or, without a prompt, one
 * llmsvc_context_generate: the reply to the conversation), its pieces streamed to a Java
 * PieceSink (with their token ids, through llmsvc_call_options.on_tokens, when the sink wants them),
 * with the options of CallOptions (ABI 1.3: the structured output's json_schema or grammar too;
 * ABI 1.5: the elastic level).
 *
 * The piece callback runs inside llmsvc_call, on the calling thread, within this native frame.
 * It never leaves a Java exception pending while the library runs: a throwing sink is caught
 * (kept as a local reference), the call cancelled, and the throwable rethrown once
 * llmsvc_call has returned. Each piece's byte[] is deleted at once, so a long reply does not
 * pile up local references.
 *
 * Once the sink has said stop (false or an exception) it gets no more pieces. The header
 * promises the callback is not called again after a non-zero return; the glue keeps its own
 * guard as well, since a Java listener is promised silence after it cancels.
 */
#include <stdlib.h>
#include <string.h>

#include "jni_support.h"
#include "org_llmsvc_Native.h"

typedef struct call_state {
  JNIEnv* env;         /* the calling thread's */
  jobject sink;        /* org.llmsvc.PieceSink */
  jthrowable thrown;   /* what the sink threw, rethrown after the call */
  int stopped;         /* the sink returned false, threw, or could not be reached */
  int foreign_thread;  /* the library called back on another thread (it never should) */
} call_state;

static int on_piece(const char* piece, size_t len, int32_t token, void* user) {
  call_state* st = user;
  if (st->stopped) return 1; /* cancelled already: keep cancelling, touch no Java */
  /* A JNIEnv is only valid on its own thread: check rather than trust. */
  JNIEnv* env = NULL;
  if ((*llmsvc_jni.vm)->GetEnv(llmsvc_jni.vm, (void**)&env, LLMSVC_JNI_VERSION) != JNI_OK || env != st->env) {
    st->foreign_thread = st->stopped = 1;
    return 1;
  }
  jbyteArray bytes = jni_bytes(env, piece, len);
  jboolean go_on = JNI_FALSE;
  if (bytes != NULL) {
    go_on = (*env)->CallBooleanMethod(env, st->sink, llmsvc_jni.sink_piece, bytes, (jint)token);
  }
  if ((*env)->ExceptionCheck(env)) {
    st->thrown = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
  }
  if (bytes != NULL) (*env)->DeleteLocalRef(env, bytes);
  st->stopped = st->thrown != NULL || !go_on;
  return st->stopped;
}

/* `n` values of `data` in a new int[] / float[]; NULL with an exception pending on failure. */
static jintArray int_array(JNIEnv* env, const int32_t* data, size_t n) {
  jintArray a = (*env)->NewIntArray(env, (jsize)n);
  if (a != NULL && n > 0) (*env)->SetIntArrayRegion(env, a, 0, (jsize)n, (const jint*)data);
  return a;
}

static jfloatArray float_array(JNIEnv* env, const float* data, size_t n) {
  jfloatArray a = (*env)->NewFloatArray(env, (jsize)n);
  if (a != NULL && n > 0) (*env)->SetFloatArrayRegion(env, a, 0, (jsize)n, data);
  return a;
}

/* llmsvc_piece_fn: as on_piece, to sink.tokens(byte[], int[], float[] or null). */
static int on_tokens(const llmsvc_piece* piece, void* user) {
  call_state* st = user;
  if (st->stopped) return 1;
  JNIEnv* env = NULL;
  if ((*llmsvc_jni.vm)->GetEnv(llmsvc_jni.vm, (void**)&env, LLMSVC_JNI_VERSION) != JNI_OK || env != st->env) {
    st->foreign_thread = st->stopped = 1;
    return 1;
  }
  jbyteArray bytes = jni_bytes(env, piece->text, piece->len);
  jintArray ids = bytes != NULL ? int_array(env, piece->tokens, piece->n_tokens) : NULL;
  jfloatArray lps = ids != NULL && piece->logprobs != NULL ? float_array(env, piece->logprobs, piece->n_tokens) : NULL;
  jboolean go_on = JNI_FALSE;
  if (ids != NULL && (piece->logprobs == NULL || lps != NULL)) {
    go_on = (*env)->CallBooleanMethod(env, st->sink, llmsvc_jni.sink_tokens, bytes, ids, lps);
  }
  if ((*env)->ExceptionCheck(env)) {
    st->thrown = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
  }
  if (bytes != NULL) (*env)->DeleteLocalRef(env, bytes);
  if (ids != NULL) (*env)->DeleteLocalRef(env, ids);
  if (lps != NULL) (*env)->DeleteLocalRef(env, lps);
  st->stopped = st->thrown != NULL || !go_on;
  return st->stopped;
}

/* The stop strings as C strings: *out has `n` entries, each freed by free_stops. */
static int copy_stops(JNIEnv* env, jobjectArray stop, char*** out, size_t* n) {
  jsize count = (*env)->GetArrayLength(env, stop);
  char** stops = calloc(count > 0 ? (size_t)count : 1, sizeof *stops);
  if (stops == NULL) {
    jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: no memory for the stop strings");
    return -1;
  }
  *out = stops;
  *n = (size_t)count;
  for (jsize i = 0; i < count; i++) {
    jbyteArray s = (jbyteArray)(*env)->GetObjectArrayElement(env, stop, i);
    if ((*env)->ExceptionCheck(env)) return -1;
    int rc = jni_cstring(env, s, &stops[i]);
    (*env)->DeleteLocalRef(env, s);
    if (rc != 0) return -1;
  }
  return 0;
}

static void free_stops(char** stops, size_t n) {
  if (stops == NULL) return;
  for (size_t i = 0; i < n; i++) free(stops[i]);
  free(stops);
}

/* Copies the result into the Java arrays; 0, or -1 with an exception pending. */
static int write_result(JNIEnv* env, const llmsvc_call_result* r, jintArray ints, jdoubleArray doubles) {
  jint iv[org_llmsvc_Native_RESULT_INTS];
  iv[org_llmsvc_Native_RESULT_PROMPT_TOKENS] = r->prompt_tokens;
  iv[org_llmsvc_Native_RESULT_GENERATED_TOKENS] = r->generated_tokens;
  iv[org_llmsvc_Native_RESULT_CONTEXT_TOKENS] = r->context_tokens;
  iv[org_llmsvc_Native_RESULT_FINISH_REASON] = r->finish_reason;
  iv[org_llmsvc_Native_RESULT_CHUNKS_LOADED] = r->chunks_loaded;
  iv[org_llmsvc_Native_RESULT_CHUNKS_RECOMPUTED] = r->chunks_recomputed;
  iv[org_llmsvc_Native_RESULT_TOOL_CALLS] = r->tool_calls; /* 0 from a library before ABI 1.4 */
  iv[org_llmsvc_Native_RESULT_TOOL_CALL_ERRORS] = r->tool_call_errors;
  iv[org_llmsvc_Native_RESULT_LEVEL_PERCENT] = r->level_percent; /* 0 from a library before ABI 1.5 */
  iv[org_llmsvc_Native_RESULT_SLO_MISSED] = r->slo_missed;
  (*env)->SetIntArrayRegion(env, ints, 0, org_llmsvc_Native_RESULT_INTS, iv);
  if ((*env)->ExceptionCheck(env)) return -1;
  jdouble dv[org_llmsvc_Native_RESULT_DOUBLES];
  dv[org_llmsvc_Native_RESULT_SWITCH_IN_MS] = r->switch_in_ms;
  dv[org_llmsvc_Native_RESULT_TTFT_MS] = r->ttft_ms;
  dv[org_llmsvc_Native_RESULT_PREFILL_MS] = r->prefill_ms;
  dv[org_llmsvc_Native_RESULT_DECODE_MS] = r->decode_ms;
  dv[org_llmsvc_Native_RESULT_TPOT_MS] = r->tpot_ms;
  dv[org_llmsvc_Native_RESULT_CONSTRAIN_MS] = r->constrain_ms;
  dv[org_llmsvc_Native_RESULT_PROMPT_KEPT] = r->prompt_kept; /* 0 from a library before ABI 1.7 */
  (*env)->SetDoubleArrayRegion(env, doubles, 0, org_llmsvc_Native_RESULT_DOUBLES, dv);
  return (*env)->ExceptionCheck(env) ? -1 : 0;
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_call(JNIEnv* env, jclass cls, jlong context, jbyteArray prompt, jint set,
                                                   jlong seed, jfloat temperature, jint top_k, jfloat top_p,
                                                   jfloat min_p, jfloat repeat_penalty, jint repeat_last_n,
                                                   jint max_tokens, jfloat slo_ttft_ratio, jfloat slo_tpot_ratio,
                                                   jint level_percent, jfloat prompt_keep, jbyteArray adapter,
                                                   jobjectArray stop,
                                                   jbyteArray json_schema,
                                                   jbyteArray grammar, jboolean token_ids, jboolean logprobs,
                                                   jobject sink, jintArray ints, jdoubleArray doubles) {
  (void)cls;
  char* prompt_c = NULL;
  size_t prompt_len = 0;
  char** stops = NULL;
  size_t n_stop = 0;
  char* json_schema_c = NULL; /* structured output (ABI 1.3): NULL, none */
  char* grammar_c = NULL;
  char* adapter_c = NULL; /* ABI 1.6 (checked on the Java side): NULL, the context's */
  /* A null prompt: generate, the reply to the conversation (which ends with a user message). */
  if ((prompt != NULL && jni_buffer(env, prompt, &prompt_c, &prompt_len) != 0) ||
      copy_stops(env, stop, &stops, &n_stop) != 0 || jni_cstring(env, json_schema, &json_schema_c) != 0 ||
      jni_cstring(env, grammar, &grammar_c) != 0 || jni_cstring(env, adapter, &adapter_c) != 0)
    goto done;

  llmsvc_call_options o;
  memset(&o, 0, sizeof o);
  llmsvc_call_options_init(&o);
  if (set & org_llmsvc_Native_CALL_SEED) o.seed = (uint64_t)seed;
  if (set & org_llmsvc_Native_CALL_TEMPERATURE) o.temperature = temperature;
  if (set & org_llmsvc_Native_CALL_TOP_K) o.top_k = top_k;
  if (set & org_llmsvc_Native_CALL_TOP_P) o.top_p = top_p;
  if (set & org_llmsvc_Native_CALL_MIN_P) o.min_p = min_p;
  if (set & org_llmsvc_Native_CALL_REPEAT_PENALTY) o.repeat_penalty = repeat_penalty;
  if (set & org_llmsvc_Native_CALL_REPEAT_LAST_N) o.repeat_last_n = repeat_last_n;
  if (set & org_llmsvc_Native_CALL_MAX_TOKENS) o.max_tokens = max_tokens;
  if (set & org_llmsvc_Native_CALL_SLO_TTFT) o.slo_ttft_ratio = slo_ttft_ratio;
  if (set & org_llmsvc_Native_CALL_SLO_TPOT) o.slo_tpot_ratio = slo_tpot_ratio;
  if (set & org_llmsvc_Native_CALL_LEVEL) o.level_percent = level_percent; /* ABI 1.5 (checked on the Java side) */
  if (set & org_llmsvc_Native_CALL_KEEP) o.prompt_keep = prompt_keep;       /* ABI 1.7 (checked on the Java side) */
  o.stop = (const char* const*)stops;
  o.n_stop = n_stop;
  o.json_schema = json_schema_c;
  o.grammar = grammar_c;
  o.adapter = adapter_c;
  call_state st = {env, sink, NULL, 0, 0};
  if (token_ids) { /* the pieces with their ids, to sink.tokens instead of sink.piece */
    o.on_tokens = on_tokens;
    o.on_tokens_user = &st;
    o.logprobs = logprobs ? 1 : 0;
  }

  llmsvc_call_result r;
  memset(&r, 0, sizeof r);
  llmsvc_call_result_init(&r);
  llmsvc_token_fn text_fn = token_ids ? NULL : on_piece;
  llmsvc_status status = prompt == NULL
                             ? llmsvc_context_generate(jni_context(context), &o, text_fn, &st, &r)
                             : llmsvc_call(jni_context(context), prompt_c, prompt_len, &o, text_fn, &st, &r);

  if (st.thrown != NULL) { /* the sink threw: the call was cancelled for it; its exception wins */
    (*env)->Throw(env, st.thrown);
    (*env)->DeleteLocalRef(env, st.thrown);
  } else if (st.foreign_thread) {
    jni_throw(env, "java/lang/IllegalStateException",
              "llmsvc_jni: the library streamed a piece on another thread; the call was cancelled");
  } else if (status == LLMSVC_OK && st.stopped) {
    /* The sink said stop, but the call had already finished (in the daemon, before the CANCEL
     * arrived): the listener still sees the cancel it asked for, with the result it had. */
    if (write_result(env, &r, ints, doubles) == 0) {
      jni_throw_status_detail(env, LLMSVC_ERR_CANCELLED, "the listener cancelled the call as it finished");
    }
  } else if (status == LLMSVC_OK) {
    write_result(env, &r, ints, doubles);
  } else {
    /* A cancelled call still fills the result: the Java side attaches it to the exception.
     * (write_result calls no llmsvc_ function, so the last error is still this call's.) */
    if (status == LLMSVC_ERR_CANCELLED && write_result(env, &r, ints, doubles) != 0) goto done;
    jni_throw_status(env, status);
  }
done:
  free(prompt_c);
  free_stops(stops, n_stop);
  free(json_schema_c);
  free(grammar_c);
  free(adapter_c);
}
