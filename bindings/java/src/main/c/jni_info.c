// SPDX-License-Identifier: Apache-2.0
/* jni_info.c — org.llmsvc.Native's model information and token counting (ABI 1.2; of messages,
 * ABI 1.3). */
#include <stdlib.h>
#include <string.h>

#include "jni_support.h"
#include "org_llmsvc_Native.h"

/* Sets out[i] to a new byte[] of the NUL-terminated `s`; 0, or -1 with an exception pending. */
static int set_string(JNIEnv* env, jobjectArray out, jsize i, const char* s) {
  jbyteArray b = jni_bytes(env, s, strlen(s));
  if (b == NULL) return -1;
  (*env)->SetObjectArrayElement(env, out, i, b);
  (*env)->DeleteLocalRef(env, b);
  return (*env)->ExceptionCheck(env) ? -1 : 0;
}

JNIEXPORT jobjectArray JNICALL Java_org_llmsvc_Native_modelInfo(JNIEnv* env, jclass cls, jlong service, jintArray ints,
                                                                jlongArray longs, jintArray type_tensors,
                                                                jlongArray type_bytes) {
  (void)cls;
  llmsvc_model_info m;
  memset(&m, 0, sizeof m); /* an older library's _init() sets only the fields it knows */
  llmsvc_model_info_init(&m);
  llmsvc_status st = llmsvc_model_info_get(jni_service(service), &m);
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
    return NULL;
  }
  const int max_types = org_llmsvc_Native_MODEL_MAX_WEIGHT_TYPES;
  const int n_types = m.n_weight_types < 0 ? 0 : m.n_weight_types > max_types ? max_types : m.n_weight_types;
  jint iv[org_llmsvc_Native_MODEL_INTS];
  iv[org_llmsvc_Native_MODEL_READY] = m.ready;
  iv[org_llmsvc_Native_MODEL_N_CTX_TRAIN] = m.n_ctx_train;
  iv[org_llmsvc_Native_MODEL_N_CTX] = m.n_ctx;
  iv[org_llmsvc_Native_MODEL_N_VOCAB] = m.n_vocab;
  iv[org_llmsvc_Native_MODEL_N_LAYER] = m.n_layer;
  iv[org_llmsvc_Native_MODEL_HAS_CHAT_TEMPLATE] = m.has_chat_template;
  iv[org_llmsvc_Native_MODEL_BOS] = m.bos.id;
  iv[org_llmsvc_Native_MODEL_EOS] = m.eos.id;
  iv[org_llmsvc_Native_MODEL_EOT] = m.eot.id;
  iv[org_llmsvc_Native_MODEL_N_WEIGHT_TYPES] = n_types;
  (*env)->SetIntArrayRegion(env, ints, 0, org_llmsvc_Native_MODEL_INTS, iv);
  jlong lv[org_llmsvc_Native_MODEL_LONGS];
  lv[org_llmsvc_Native_MODEL_N_PARAMS] = (jlong)m.n_params;
  lv[org_llmsvc_Native_MODEL_WEIGHT_BYTES] = (jlong)m.weight_bytes;
  (*env)->SetLongArrayRegion(env, longs, 0, org_llmsvc_Native_MODEL_LONGS, lv);
  jint tensors[org_llmsvc_Native_MODEL_MAX_WEIGHT_TYPES];
  jlong bytes[org_llmsvc_Native_MODEL_MAX_WEIGHT_TYPES];
  for (int k = 0; k < n_types; k++) {
    tensors[k] = m.weight_types[k].tensors;
    bytes[k] = (jlong)m.weight_types[k].bytes;
  }
  (*env)->SetIntArrayRegion(env, type_tensors, 0, n_types, tensors);
  (*env)->SetLongArrayRegion(env, type_bytes, 0, n_types, bytes);
  if ((*env)->ExceptionCheck(env)) return NULL;

  jobjectArray out =
      (*env)->NewObjectArray(env, org_llmsvc_Native_MODEL_STRINGS + n_types, llmsvc_jni.byte_array_class, NULL);
  if (out == NULL) return NULL;
  const char* strings[org_llmsvc_Native_MODEL_STRINGS];
  strings[org_llmsvc_Native_MODEL_ARCHITECTURE] = m.architecture;
  strings[org_llmsvc_Native_MODEL_NAME] = m.name;
  strings[org_llmsvc_Native_MODEL_BOS_TEXT] = m.bos.text;
  strings[org_llmsvc_Native_MODEL_EOS_TEXT] = m.eos.text;
  strings[org_llmsvc_Native_MODEL_EOT_TEXT] = m.eot.text;
  strings[org_llmsvc_Native_MODEL_DEVICES] = m.devices;
  for (jsize i = 0; i < org_llmsvc_Native_MODEL_STRINGS; i++)
    if (set_string(env, out, i, strings[i]) != 0) return NULL;
  for (int k = 0; k < n_types; k++)
    if (set_string(env, out, org_llmsvc_Native_MODEL_STRINGS + k, m.weight_types[k].name) != 0) return NULL;
  return out;
}

JNIEXPORT jintArray JNICALL Java_org_llmsvc_Native_countTokens(JNIEnv* env, jclass cls, jlong service, jbyteArray text,
                                                               jintArray roles, jobjectArray contents, jboolean chat,
                                                               jboolean first_turn, jbyteArray system_prompt) {
  (void)cls;
  char* text_c = NULL;
  size_t text_len = 0;
  char* system_c = NULL;
  int32_t* ids = NULL;
  jintArray out = NULL;
  llmsvc_message* messages = NULL; /* with roles: the messages counted instead of text (ABI 1.3) */
  char** buffers = NULL;
  size_t n_messages = 0;
  if ((text != NULL && jni_buffer(env, text, &text_c, &text_len) != 0) ||
      (roles != NULL && jni_messages(env, roles, contents, NULL, &messages, &buffers, &n_messages) != 0) ||
      jni_cstring(env, system_prompt, &system_c) != 0)
    goto done;
  llmsvc_count_options o;
  memset(&o, 0, sizeof o);
  llmsvc_count_options_init(&o);
  o.chat = chat ? 1 : 0;
  o.first_turn = first_turn ? 1 : 0;
  o.system_prompt = system_c;
  if (roles != NULL) {
    o.messages = messages;
    o.n_messages = n_messages;
  }
  int32_t n = 0;
  llmsvc_status st = llmsvc_count_tokens(jni_service(service), text_c, text_len, &o, &n);
  if (st == LLMSVC_OK && n > 0) { /* again, with room for every id */
    ids = malloc((size_t)n * sizeof *ids);
    if (ids == NULL) {
      jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: no memory for the token ids");
      goto done;
    }
    o.ids = ids;
    o.ids_capacity = (size_t)n;
    st = llmsvc_count_tokens(jni_service(service), text_c, text_len, &o, &n);
  }
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
    goto done;
  }
  out = (*env)->NewIntArray(env, n);
  if (out != NULL && n > 0) (*env)->SetIntArrayRegion(env, out, 0, n, (const jint*)ids);
done:
  free(text_c);
  free(system_c);
  free(ids);
  jni_messages_free(messages, buffers, n_messages);
  return out;
}
