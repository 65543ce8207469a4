// SPDX-License-Identifier: Apache-2.0
/* jni_service.c — org.llmsvc.Native's service methods: version, status names, bind, unbind, stats. */
#include <stdlib.h>
#include <string.h>

#include "jni_support.h"
#include "org_llmsvc_Native.h"

JNIEXPORT jint JNICALL Java_org_llmsvc_Native_abiVersion(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return (jint)llmsvc_abi_version();
}

JNIEXPORT jstring JNICALL Java_org_llmsvc_Native_statusName(JNIEnv* env, jclass cls, jint status) {
  (void)cls;
  /* Plain ASCII, for which modified UTF-8 and UTF-8 agree. */
  return (*env)->NewStringUTF(env, llmsvc_status_name((llmsvc_status)status));
}

JNIEXPORT jlong JNICALL Java_org_llmsvc_Native_bind(JNIEnv* env, jclass cls, jbyteArray target, jbyteArray model_path,
                                                    jbyteArray state_dir, jint set, jint n_threads, jint n_ctx,
                                                    jint chunk_tokens, jboolean recompute, jlong kv_budget_bytes,
                                                    jfloat kv_ratio, jbyteArray adapters) {
  (void)cls;
  char* target_c = NULL;
  char* model_c = NULL;
  char* state_c = NULL;
  char* adapters_c = NULL;
  jlong handle = 0;
  if (jni_cstring(env, target, &target_c) != 0 || jni_cstring(env, model_path, &model_c) != 0 ||
      jni_cstring(env, state_dir, &state_c) != 0 || jni_cstring(env, adapters, &adapters_c) != 0) {
    goto done;
  }
  llmsvc_bind_options o;
  /* Zeroed first: an older library's _init() sets only the fields it knows. */
  memset(&o, 0, sizeof o);
  llmsvc_bind_options_init(&o);
  o.target = target_c;
  o.model_path = model_c;
  o.state_dir = state_c;
  o.adapters = adapters_c; /* ABI 1.6 (checked on the Java side) */
  if (set & org_llmsvc_Native_BIND_THREADS) o.n_threads = n_threads;
  if (set & org_llmsvc_Native_BIND_N_CTX) o.n_ctx = n_ctx;
  if (set & org_llmsvc_Native_BIND_CHUNK_TOKENS) o.chunk_tokens = chunk_tokens;
  if (set & org_llmsvc_Native_BIND_RECOMPUTE) o.recompute_on_model_change = recompute ? 1 : 0;
  if (set & org_llmsvc_Native_BIND_KV_BUDGET) o.kv_budget_bytes = (uint64_t)kv_budget_bytes;
  if (set & org_llmsvc_Native_BIND_KV_RATIO) o.kv_ratio = kv_ratio;
  llmsvc_service* service = NULL;
  llmsvc_status st = llmsvc_bind(&o, &service);
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
  } else {
    handle = jni_handle(service);
  }
done:
  free(target_c);
  free(model_c);
  free(state_c);
  free(adapters_c);
  return handle;
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_unbind(JNIEnv* env, jclass cls, jlong service) {
  (void)env;
  (void)cls;
  llmsvc_unbind(jni_service(service));
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_stats(JNIEnv* env, jclass cls, jlong service, jlongArray longs) {
  (void)cls;
  llmsvc_stats s;
  memset(&s, 0, sizeof s);
  llmsvc_stats_init(&s);
  llmsvc_status st = llmsvc_get_stats(jni_service(service), &s);
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
    return;
  }
  jlong v[org_llmsvc_Native_STATS_LONGS];
  v[org_llmsvc_Native_STATS_OPEN_CONTEXTS] = s.open_contexts;
  v[org_llmsvc_Native_STATS_KNOWN_CONTEXTS] = s.known_contexts;
  v[org_llmsvc_Native_STATS_CALLS] = (jlong)s.calls;
  v[org_llmsvc_Native_STATS_PROMPT_TOKENS] = (jlong)s.prompt_tokens;
  v[org_llmsvc_Native_STATS_GENERATED_TOKENS] = (jlong)s.generated_tokens;
  v[org_llmsvc_Native_STATS_KV_BYTES] = (jlong)s.kv_bytes;
  v[org_llmsvc_Native_STATS_WEIGHT_BYTES] = (jlong)s.weight_bytes;
  v[org_llmsvc_Native_STATS_KV_PEAK_BYTES] = (jlong)s.kv_peak_bytes;
  v[org_llmsvc_Native_STATS_CHUNKS_LOADED] = (jlong)s.chunks_loaded;
  v[org_llmsvc_Native_STATS_CHUNKS_RECOMPUTED] = (jlong)s.chunks_recomputed;
  v[org_llmsvc_Native_STATS_SWAP_OUT_BYTES] = (jlong)s.swap_out_bytes;
  v[org_llmsvc_Native_STATS_SWAP_OUT_FAILURES] = (jlong)s.swap_out_failures;
  (*env)->SetLongArrayRegion(env, longs, 0, org_llmsvc_Native_STATS_LONGS, v);
}
